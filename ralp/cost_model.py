"""Predicted step time and bytes per link for sync PS, ring all-reduce and FC-on-PS.

Why: the placement decision is a comparison of predicted step times, and each
prediction must be explainable: how many bytes cross which link in which
direction, how long each resource is busy, and which one limits the step.

Byte formulas (fp32, P = P_conv + P_fc, A floats per image at the cut, B images
per worker, W workers, S PS tasks; one worker per host, k > 1 below):
- "ps":      each worker pulls 4P and pushes 4P; each PS task sends and receives 4PW/S.
             Colocated (``ps_placement="colocated"``, tf_cnn_benchmarks' layout): one PS task
             beside each worker, holding P_i of the variables (greedy by size, ralp/sharding.py);
             the local shard never crosses the wire, so host i sends 4(W-1)P_i parameters and
             4(P - P_i) gradients and receives the same amounts the other way; bytes are
             reported as the mean over hosts, times follow the busiest host.
- "horovod": each worker sends and receives 2(N-1)/N * 4P (N = W); no PS.
- "ralp":    each worker pulls and pushes the tower (4 P_tower each way), sends 4BA
             activations and receives 4BA activation gradients; the tower is sharded
             over the S PS tasks, the head (and so all activation traffic) lives on
             PS task 0, whose numbers are reported (the busiest task).
- "ralp-hybrid": the tower's gradients are ring-all-reduced among the workers (2(W-1)/W *
             4 P_tower each way); each worker sends 4BA activations and receives 4BA gradients.
             S = 1: the head on one PS, which receives and sends 4WBA. S > 1 (the head a chain
             of Dense layers of widths H_0..H_{n-1}, C = H_{n-1}, each split Megatron-style
             over the S PS tasks, by input rows when i is even, by columns when odd): PS task s
             receives and sends 4WBA/S (its feature slice); after each even layer but the last
             the tasks ring-all-reduce its partial sums, 2(S-1)/S * 4WBH_i each way per task,
             and the same again for the matching input gradients; the logits end on task 0,
             which receives (S-1) * 4WBC (last layer row-split: partial sums) or (S-1)/S * 4WBC
             (column-split: slices) and sends as much back as logit gradients. Reported: task
             0's bytes (the busiest). Head compute and its update divide by S.
P counts every variable, non-trainable batch-norm statistics included: under a PS
they live on the PS and are read (pulled) and updated (pushed) every step.

Several workers per host (``workers_per_host=k``, W = H x k; default the hardware's
``gpus_per_host``): a host's k workers share its one NIC. A worker's bytes (``worker_tx_bytes``)
are its share of what crosses the network; its host's NIC carries k times as much
(``host_tx_bytes``, what the host's interface counters see), and each worker gets 1/k of the NIC
(a PCIe link slower than that caps it: ``Hardware.worker_link_Bps``; a PS task's likewise). Bytes between two devices
of one host never reach the wire (``intra_host_bytes``, per device): on GPU hosts they take the
devices' own link (``intra_host_bandwidth``, NVLink or PCIe peer), beside the NIC, so a phase
lasts as long as the slower of the two; on CPU hosts (no such link) they are copied through
shared memory (``SHARED_MEMORY_PASSES`` per float, worker CPU time). Per strategy:
- "ps": per-worker bytes as above; each host's NIC carries k x 4P each way; the PS is unchanged.
- colocated "ps": PS task i beside worker i on host i // k; host h holds Q_h (its k tasks'
  shards) and sends 4(W-k)Q_h parameters and k x 4(P-Q_h) gradients, receives the same amounts
  the other way; reads of shards on the same host go through loopback and cost the transport's CPU, as one
  worker's own shard does.
- "horovod" (and the hybrid's tower ring): one ring over all W workers in rank order (Gloo's
  ring; NCCL's with one NIC per host; Horovod's opt-in hierarchical all-reduce is not priced):
  every edge carries 2(W-1)/W x 4P each way, k-1 of a host's k edges stay inside it, so each
  host's NIC carries one edge (a worker 1/k of it, at 1/k of the NIC) and each device (k-1)/k of
  an edge inside its host; 2(W-1) latencies. All-gathered codecs: (W-1) payloads per edge.
- "ralp", "ralp-hybrid": per-worker activation and tower bytes as above, k x them on each NIC.

Compression (``compression=``, the codecs of strategies/codecs.py): what is encoded
where follows the strategies' code. Gradient pushes (ps, ralp's tower) are encoded
on the worker and decoded on the PS; parameter pulls stay fp32. RALP's activations
and activation gradients use fp16/int8 (encoded by the sender, decoded by the
receiver) but stay fp32 under top-k, which the strategy applies to gradients only.
The hybrid: every hop of its tower's ring carries the codec's payload of a partial sum
(fp16, int8; top-k refused), its activations as RALP's; its rings run in buckets under the
backward (``--hybrid-bucket-mb``, priced as RALP's streamed push).
Horovod: fp16 is a half-precision ring all-reduce; int8 and top-k payloads cannot be
summed in a ring, so each rank all-gathers every rank's payload ((N-1) payloads each
way). int8 adds a 4-byte scale per tensor, counted once for the model (a few dozen
bytes). Encoding and decoding take time: ``CODEC_PASSES`` elementwise passes per
element, each pass costing ``PASS_FLOPS`` FLOPs of the sender's or receiver's
throughput; that time adds to worker compute (encode/decode on workers) and PS
compute (on the PS).

Compute: with a ``ModelTiming`` (the model's own step measured on one host, see
bench/driver/calibration.py) the worker's step, the tower's and the head's are those
seconds; without one, ~3x the forward FLOPs (forward + backward) at the hardware's
conv and matmul rates. Memory-bound work is priced in elementwise passes
(``Hardware.pass_seconds``: one pass reads two operands and writes one), not in
FLOPs, on the device that runs it: the measured ``pass_s`` (this machine), else that device's
memory bandwidth (presets: the datasheet's; the PS task's is ``ps_memory_bandwidth``, by default
the workers' device, as RALP's head runs on the PS host's accelerator), else ``PASS_FLOPS`` of
the conv rate; codec passes likewise. The PS sums W gradients (W passes over its share) and applies momentum SGD
(2 passes); Horovod copies gradients into and out of its fusion buffer (2 passes),
reduces (N-1)/N of them (1 pass) and every rank applies the same update (2 passes);
RALP's PS does the PS's work for the tower and the update of the head.

Timing: training costs ~3x the forward FLOPs (forward + backward). Each cost function states
its step as an ordered list of dependent stages (ralp/evaluator.py ``Stage``: which resource,
for how long, after what), and one evaluator turns every strategy's list into time the same
way: a stage starts when what it waits for has ended and its resources are free, as TF's
dataflow executor runs ops. What overlaps follows from the stages: sync PS (both layouts)
reads every variable at the step's start, so the conv parameters arrive before the last FC
bytes (the last of them after ``LAST_CONV_SHARE`` of the FC weights, measured) and the conv
forward runs while the rest of the FC weights are still coming, and pushes each layer's
gradients as its backward finishes (ralp/step_cost.py ``sync_ps_stages``,
``Setting.streamed``), with the CPU the worker's host spends in TensorFlow's transport as
stages of its own (``TRANSPORT_PASSES``;
colocated, its PS task's share too, on two hosts at once: the busiest one serving its shard
while its own push shares that link, as two flows, and the one that pulls the most waiting for
it: ralp/colocated_ps_cost.py); RALP streams its tower's gradients the same way;
under both split strategies the PS computes the head's weight gradients and update while the
workers run the tower's backward (``head_beside_backward``). A transfer lasts as long as its
slowest side (worker link or PS link) plus its latency. With ``overlap`` the order is dropped:
every resource busy at once, the step is the busiest one (a lower bound, ``evaluator.bound``).
The bottleneck is the resource group that holds the schedule's critical path longest.

Pipelined micro-batches (``micro_batches=m``, the hybrid only, m dividing B): each worker's
batch goes through the tower forward, the activations' trip up, the head's forward and
backward, the gradients' trip down and the tower backward in m micro-batches, each a set of
stages with 1/m of the work and bytes and all of its transfers' latency; the ring all-reduce
and the updates follow once. Bytes per step do not change with m. The evaluator runs them as
the executor would, the next micro-batch's forward while the previous one travels (replacing
the bottleneck-plus-fill approximation R_max + (T_seq - R_max)/m, which it equals for a chain
of stages on separate resources: tests/test_evaluator.py). Not priced: the smaller matmuls'
lower efficiency and the per-micro-batch op launches, which is why the analyzer wants a clear
gain before pipelining.
"""
from dataclasses import dataclass, field, replace
from typing import Dict, Optional

from ralp.errors import UserError
from ralp.evaluator import GROUPS, INTRA, LINKS, PS_RX, PS_TX, WORKER_CPU, WORKER_RX, WORKER_TX, bound, evaluate
from ralp.hardware import PASS_FLOPS, Hardware  # noqa: F401 (re-exported)
from ralp.step_cost import (  # noqa: F401 (re-exported)
    BESIDE, CODEC_PASSES, FUSION_PASSES, HYBRID_BUCKET_MB, TRAIN_FLOPS_FACTOR, UPDATE_PASSES, Setting, StepCost,
    compute_seconds, parse_compression)
from ralp.strategy_costs import (  # noqa: F401 (re-exported)
    CODECS_OF, COST_FUNCTIONS, PIPELINED, SHARDED_HEAD, SPLIT_STRATEGIES)

PRICED = tuple(COST_FUNCTIONS)  # one cost function each (ralp/strategy_costs.py)
STRATEGIES = PRICED  # what the analyzer searches (auto's candidates)
PS_PLACEMENTS = ("dedicated", "colocated")  # S PS hosts | one PS task on every worker host
_LABELS = {"ps": "sync PS", "horovod": "ring all-reduce (Horovod)", "ralp": "FC-on-PS (RALP)",
           "ralp-hybrid": "hybrid: tower all-reduced, FC on PS"}
# Each cost function's label in the analyzer's reasons (a strategy's own short label is its
# spec's, bench/core/strategy_specs.py); one without a label above is named by its key, never a KeyError.
STRATEGY_LABELS = {name: _LABELS.get(name, name) for name in PRICED}
BOTTLENECKS = ("worker compute", "PS compute", "PS link", "worker link")


@dataclass
class Prediction:
    """One strategy's predicted step; bytes are per step, per worker or per (busiest) PS task."""
    strategy: str
    cut: Optional[str]
    workers: int
    batch_size: int
    step_time_s: float
    compute_s: float
    comm_s: float
    bottleneck: str
    worker_tx_bytes: float
    worker_rx_bytes: float
    ps_tx_bytes: float
    ps_rx_bytes: float
    breakdown: Dict[str, float] = field(default_factory=dict)
    ps: int = 1                        # PS tasks it runs with (0: none; colocated: one per worker)
    ps_placement: Optional[str] = "dedicated"  # None: no PS
    micro_batches: int = 1
    workers_per_host: int = 1          # k: workers sharing one host and its NIC
    host_tx_bytes: float = 0.0         # what one worker host puts on the network (k x worker_tx_bytes)
    host_rx_bytes: float = 0.0         # what it takes off the network
    intra_host_bytes: float = 0.0      # what each worker's device sends to its host's other devices
    hierarchical: bool = False         # Horovod's hierarchical all-reduce (ralp/step_cost.py hierarchical_phases)
    hybrid_bucket_mb: Optional[float] = None  # the hybrid's ring buckets (MiB; 0: one fused ring); None: no ring buckets

    @property
    def worker_bytes(self) -> float:
        """Pull + push per worker per step (the anchor table's number)."""
        return self.worker_tx_bytes + self.worker_rx_bytes

    @property
    def host_bytes(self) -> float:
        """Out + in on one worker host's NIC per step (what its interface counters see)."""
        return self.host_tx_bytes + self.host_rx_bytes

    @property
    def images_per_s(self) -> float:
        return self.workers * self.batch_size / self.step_time_s


@dataclass(frozen=True)
class ModelTiming:
    """One host's measured seconds for a model's training step (forward + backward):
    ``full_s`` the whole model at ``batch_size`` images; ``tower_s`` and ``head_s`` the
    halves at ``cut``, the tower at ``batch_size`` and the head at ``workers`` x
    ``batch_size`` (what RALP's PS runs). Figures for another cut, batch or worker
    count are derived from the FLOP rates these imply."""
    batch_size: int
    workers: int
    full_s: float
    cut: Optional[str] = None
    tower_s: Optional[float] = None
    head_s: Optional[float] = None


# ----------------------------------------------------------------------------- model

def _check_positive(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise UserError(f"{name} must be a positive integer, got {value!r}")


def model_hardware(profile, timing: ModelTiming, hardware: Hardware) -> Hardware:
    """``hardware`` with the conv and matmul rates this model reached in ``timing``: the tower's
    FLOPs over its seconds (conv), the head's over its seconds (dense, at W x B images)."""
    if not (timing.cut and timing.tower_s and timing.head_s):
        factor = TRAIN_FLOPS_FACTOR * timing.batch_size * compute_seconds(profile.flops, profile.dense_flops,
                                                                           hardware) / timing.full_s
        return replace(hardware, worker_conv_flops=hardware.worker_conv_flops * factor,
                       worker_dense_flops=hardware.worker_dense_flops * factor, ps_flops=hardware.ps_flops * factor)
    _, _, _, f_tower, f_head = profile.split_sizes(timing.cut)
    conv = TRAIN_FLOPS_FACTOR * timing.batch_size * f_tower / timing.tower_s
    dense = TRAIN_FLOPS_FACTOR * timing.workers * timing.batch_size * f_head / timing.head_s
    return replace(hardware, worker_conv_flops=conv, worker_dense_flops=dense, ps_flops=dense)


def workers_on_each_host(workers: int, hardware: Hardware, workers_per_host: Optional[int] = None) -> int:
    """k, the workers on each worker host: ``workers_per_host``, or by default the hardware's
    ``gpus_per_host`` (all W on one host when W is fewer). Every host must hold k workers."""
    if workers_per_host is None:
        workers_per_host = min(hardware.gpus_per_host, workers)
    _check_positive("workers per host", workers_per_host)
    if workers % workers_per_host:
        raise UserError(f"{workers} workers do not fill hosts of {workers_per_host} workers each; "
                        f"use a multiple of {workers_per_host} workers or give every host the same slots")
    return workers_per_host


def predict(profile, strategy: str, *, workers: int, batch_size: int, hardware: Hardware, ps: int = 1,
            cut: Optional[str] = None, overlap: bool = False, compression: Optional[str] = None,
            timing: Optional[ModelTiming] = None, ps_placement: str = "dedicated",
            micro_batches: int = 1, workers_per_host: Optional[int] = None,
            hybrid_bucket_mb: float = HYBRID_BUCKET_MB, hierarchical: bool = False) -> Prediction:
    """Predict one training step of ``profile`` under ``strategy`` (see module docstring): the
    strategy's cost function (ralp/strategy_costs.py) says what moves and what computes, as
    stages; ``_assemble`` turns them into time through the one evaluator. ``workers`` counts
    every worker, on workers / ``workers_per_host`` hosts (``workers_on_each_host``)."""
    if ps_placement not in PS_PLACEMENTS:
        raise UserError(f"unknown PS placement {ps_placement!r}; choose from {', '.join(PS_PLACEMENTS)}")
    _check_positive("workers", workers)
    _check_positive("batch size", batch_size)
    _check_positive("ps", ps)
    _check_positive("micro-batches", micro_batches)
    k = workers_on_each_host(workers, hardware, workers_per_host)
    if strategy not in PRICED:
        raise UserError(f"unknown strategy {strategy!r}; choose from {', '.join(PRICED)}")
    if micro_batches > 1 and strategy not in PIPELINED:
        raise UserError(f"{strategy} has no micro-batches; only {', '.join(PIPELINED)} pipelines them")
    comp = parse_compression(compression)
    if timing is not None:
        hardware = model_hardware(profile, timing, hardware)
    train_full = TRAIN_FLOPS_FACTOR * batch_size * compute_seconds(profile.flops, profile.dense_flops, hardware)
    if timing is not None and timing.batch_size == batch_size:
        train_full = timing.full_s
    setting = Setting(profile, workers, batch_size, ps, comp, hardware, train_full, timing,
                      cut if strategy in SPLIT_STRATEGIES else None,
                      ps_placement if strategy == "ps" else "dedicated",  # only sync PS has a PS layout
                      micro_batches, k, hybrid_bucket_mb, hierarchical and strategy == "horovod")
    cost = COST_FUNCTIONS[strategy](setting)
    prediction = _assemble(strategy, workers, batch_size, hardware, cost, overlap, k)
    prediction.micro_batches = cost.micro_batches
    prediction.hybrid_bucket_mb = hybrid_bucket_mb if strategy in PIPELINED else None
    prediction.hierarchical = setting.hierarchical and any(ph.host_copy for ph in cost.phases)
    if strategy == "horovod":
        prediction.ps, prediction.ps_placement = 0, None
    elif strategy == "ps" and ps_placement == "colocated":
        prediction.ps, prediction.ps_placement = workers, ps_placement
    else:
        prediction.ps = ps
    if cost.mean_bytes is not None:  # colocated: the mean host's bytes, no PS host
        tx, rx = cost.mean_bytes
        prediction = replace(prediction, worker_tx_bytes=tx, worker_rx_bytes=rx, host_tx_bytes=k * tx,
                             host_rx_bytes=k * rx, ps_tx_bytes=0.0, ps_rx_bytes=0.0)
    return prediction


def _key(phase_name: str) -> str:
    """A phase's seconds in ``Prediction.breakdown``: 'push gradients' -> 'push_gradients_s'."""
    return phase_name.replace(" ", "_") + "_s"


COMPUTE_PHASES = ("forward", "backward", "ps compute", "worker codec")  # the breakdown names these itself


def _under_backward(stages, schedule, transfers) -> Dict[str, float]:
    """The backward pass and what leaves under it: seconds from its first stage's start to the
    last of its stages and of the transfers listed after it ending (``backward_and_push_s``), and
    how much of the PS's work beside it ran meanwhile (``ps_beside_backward_s``)."""
    first = next((i for i, st in enumerate(stages) if st.phase == "backward"), None)
    if first is None:
        return {}
    under = [st.name for st in stages[first:] if st.phase == "backward" or st.phase in transfers]
    out = {"backward_and_push_s": schedule.span(under)}
    if BESIDE in schedule.end:
        began, ended = min(schedule.start[n] for n in under), max(schedule.end[n] for n in under)
        out["ps_beside_backward_s"] = max(0.0, min(schedule.end[BESIDE], ended) - max(schedule.start[BESIDE], began))
    return out


def _assemble(strategy, W, B, hardware, cost: StepCost, overlap, k=1) -> Prediction:
    """A StepCost as a predicted step: its stages through the one evaluator (ralp/evaluator.py),
    the schedule's length (``overlap``: the bound, every resource busy at once), the resource
    group that holds its critical path, and the breakdown: each phase's seconds had it run
    alone, the compute totals, each link's busy seconds."""
    phases = cost.phases
    worker_compute = cost.worker_fwd + cost.worker_bwd + cost.worker_codec
    ps_compute = cost.ps_compute + cost.ps_codec
    breakdown = {"worker_forward_s": cost.worker_fwd, "worker_backward_s": cost.worker_bwd, "ps_compute_s": ps_compute}
    if cost.worker_codec or cost.ps_codec:
        breakdown.update(worker_codec_s=cost.worker_codec, ps_codec_s=cost.ps_codec)
    schedule = evaluate(cost.stages)
    names = {ph.name for ph in phases}
    seconds = schedule.phase_seconds()
    breakdown.update({_key(name): t for name, t in seconds.items() if name not in COMPUTE_PHASES})
    comm = sum(seconds.get(name, 0.0) for name in names)
    transfers = [st for st in cost.stages if st.phase in names]
    worker_link_busy = sum(max(st.work.get(r, 0.0) for r in (WORKER_TX, WORKER_RX, INTRA)) for st in transfers)
    ps_link_busy = sum(max(st.work.get(r, 0.0) for r in (PS_TX, PS_RX)) for st in transfers)
    if overlap and phases:
        step, timed = bound(cost.stages, hardware.latency_s)
        comm = max(timed[r] for r in LINKS)
        breakdown.update(bound_worker_host_s=timed[WORKER_CPU], bound_link_s=comm)
        bottleneck = GROUPS[max(timed, key=timed.get)]
    else:
        step = schedule.step_s
        bottleneck = schedule.bottleneck()
    if cost.micro_batches > 1:
        breakdown["micro_batches"] = cost.micro_batches
    breakdown.update(_under_backward(cost.stages, schedule, names))
    breakdown.update({"worker_link_busy_s": worker_link_busy, "ps_link_busy_s": ps_link_busy})
    totals = {key: sum(getattr(ph, key) for ph in phases) for key in ("worker_tx", "worker_rx", "ps_tx", "ps_rx")}
    return Prediction(
        strategy=strategy, cut=cost.cut, workers=W, batch_size=B, step_time_s=step,
        compute_s=worker_compute + ps_compute, comm_s=comm, bottleneck=bottleneck,
        worker_tx_bytes=totals["worker_tx"], worker_rx_bytes=totals["worker_rx"],
        ps_tx_bytes=totals["ps_tx"], ps_rx_bytes=totals["ps_rx"], breakdown=breakdown, workers_per_host=k,
        host_tx_bytes=k * totals["worker_tx"], host_rx_bytes=k * totals["worker_rx"],
        intra_host_bytes=sum(ph.intra for ph in phases))
