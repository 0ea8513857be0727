"""Predicted step time and bytes per link for sync PS, ring all-reduce and FC-on-PS.

Why: the placement decision is a comparison of predicted step times, and each
prediction must be explainable: how many bytes cross which link in which
direction, how long each resource is busy, and which one limits the step.

Byte formulas (fp32, P = P_conv + P_fc, A floats per image at the cut, B images
per worker, W workers, S PS tasks):
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
P counts every variable, non-trainable batch-norm statistics included: under a PS
they live on the PS and are read (pulled) and updated (pushed) every step.

Compression (``compression=``, the codecs of ralp/compression.py): what is encoded
where follows the strategies' code. Gradient pushes (ps, ralp's tower) are encoded
on the worker and decoded on the PS; parameter pulls stay fp32. RALP's activations
and activation gradients use fp16/int8 (encoded by the sender, decoded by the
receiver) but stay fp32 under top-k, which the strategy applies to gradients only.
Horovod: fp16 is a half-precision ring all-reduce; int8 and top-k payloads cannot be
summed in a ring, so each rank all-gathers every rank's payload ((N-1) payloads each
way). int8 adds a 4-byte scale per tensor, counted once for the model (a few dozen
bytes). Encoding and decoding take time: ``CODEC_PASSES`` elementwise passes per
element, each pass costing ``PASS_FLOPS`` FLOPs of the sender's or receiver's
throughput; that time adds to worker compute (encode/decode on workers) and PS
compute (on the PS).

Compute: with a ``ModelTiming`` (the model's own step measured on one host, see
bench/calibration.py) the worker's step, the tower's and the head's are those
seconds; without one, ~3x the forward FLOPs (forward + backward) at the hardware's
conv and matmul rates. Memory-bound work is priced in elementwise passes
(``Hardware.pass_seconds``: one pass reads two operands and writes one), not in
FLOPs: the PS sums W gradients (W passes over its share) and applies momentum SGD
(2 passes); Horovod copies gradients into and out of its fusion buffer (2 passes),
reduces (N-1)/N of them (1 pass) and every rank applies the same update (2 passes);
RALP's PS does the PS's work for the tower and the update of the head.

Timing: training costs ~3x the forward FLOPs (forward + backward). Without overlap
a step is the sum of its phases (pull, compute, transfers, push, PS work); each
transfer phase lasts as long as its slowest side (worker link or PS link) plus one
latency. With ``overlap`` communication is perfectly pipelined with compute and the
links are full duplex, so the step is the busiest resource (a lower bound).
"""
from dataclasses import dataclass, field, replace
from typing import Dict, List, Optional

from bench.errors import UserError
from ralp.hardware import Hardware

STRATEGIES = ("ps", "horovod", "ralp")
PS_PLACEMENTS = ("dedicated", "colocated")  # S PS hosts | one PS task on every worker host
STRATEGY_LABELS = {"ps": "sync PS", "horovod": "ring all-reduce (Horovod)", "ralp": "FC-on-PS (RALP)"}
TRAIN_FLOPS_FACTOR = 3  # forward + backward (two matmuls per forward one)
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

    @property
    def worker_bytes(self) -> float:
        """Pull + push per worker per step (the anchor table's number)."""
        return self.worker_tx_bytes + self.worker_rx_bytes

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


# Memory-bound passes per element (see module docstring).
UPDATE_PASSES = 2.0       # m = a*m + g; w -= lr*m
FUSION_PASSES = 2.0       # Horovod: copy into and out of the fusion buffer


@dataclass
class _Phase:
    """One transfer: bytes each worker sends/receives and each PS task sends/receives."""
    name: str
    worker_tx: float = 0.0
    worker_rx: float = 0.0
    ps_tx: float = 0.0
    ps_rx: float = 0.0
    latency_hops: int = 1


# ----------------------------------------------------------------------------- compression

def parse_compression(compression: Optional[str]):
    """None, 'fp16', 'int8' or 'topk:K' (0 < K <= 1) -> (kind, k)."""
    if compression in (None, "", "none"):
        return None, None
    if compression in ("fp16", "int8"):
        return compression, None
    if isinstance(compression, str) and compression.startswith("topk:"):
        try:
            k = float(compression.split(":", 1)[1])
        except ValueError:
            k = -1.0
        if 0 < k <= 1:
            return "topk", k
    raise UserError(f"compression {compression!r} not understood; use none, fp16, int8 or topk:K with 0<K<=1")


def _gradient_bytes(values: float, compression) -> float:
    """Bytes for a gradient of ``values`` floats: fp16 halves, int8 quarters (+ a 4-byte scale),
    top-k sends k*values (value, index) pairs of 4+4 bytes."""
    kind, k = compression
    if values <= 0:
        return 0.0
    if kind == "fp16":
        return 2.0 * values
    if kind == "int8":
        return 1.0 * values + 4
    if kind == "topk":
        return 8.0 * k * values
    return 4.0 * values


def _activation_bytes(values: float, compression) -> float:
    """Activations and their gradients: fp16/int8 apply; top-k is for gradients only."""
    kind, _ = compression
    return _gradient_bytes(values, compression) if kind in ("fp16", "int8") else 4.0 * values


# Elementwise passes per element of the dense tensor (encode, decode), measured with
# ralp/compression.py on a 4M-float tensor (2-core x86 VM, TF 2.15 CPU, 2026-12-02; runs
# varied by ~30%): one pass is a multiply-and-sum over the tensor, ~2.1 ns per element there.
# Top-k's encode includes its error feedback (add the residual, select, gather, rebuild what
# was sent, update the residual); its decode fills the dense tensor and scatters into it.
CODEC_PASSES = {None: (0.0, 0.0), "fp16": (2.0, 0.75), "int8": (1.6, 0.75), "topk": (15.0, 1.5)}
# One elementwise pass over one element costs as long as this many conv FLOPs (memory-bound
# vs compute-bound work): 2.1 ns at 37.9 GFLOP/s on the same machine; assumed to carry over
# to other hardware in proportion to its throughput.
PASS_FLOPS = 80.0


def _codec_seconds(elements: float, compression, side: int, flops: float) -> float:
    """Time to encode (side 0) or decode (side 1) ``elements`` floats at ``flops`` FLOP/s."""
    if elements <= 0:
        return 0.0
    return elements * CODEC_PASSES[compression[0]][side] * PASS_FLOPS / flops


def _activation_codec(compression):
    """The codec RALP's activations travel through: top-k leaves them fp32 (no work)."""
    return compression if compression[0] in ("fp16", "int8") else (None, None)


# ----------------------------------------------------------------------------- model

def _check_positive(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise UserError(f"{name} must be a positive integer, got {value!r}")


def _compute_seconds(flops: float, dense_flops: float, hardware: Hardware) -> float:
    return (flops - dense_flops) / hardware.worker_conv_flops + dense_flops / hardware.worker_dense_flops


def model_hardware(profile, timing: ModelTiming, hardware: Hardware) -> Hardware:
    """``hardware`` with the conv and matmul rates this model reached in ``timing``: the tower's
    FLOPs over its seconds (conv), the head's over its seconds (dense, at W x B images)."""
    if not (timing.cut and timing.tower_s and timing.head_s):
        factor = TRAIN_FLOPS_FACTOR * timing.batch_size * _compute_seconds(profile.flops, profile.dense_flops,
                                                                           hardware) / timing.full_s
        return replace(hardware, worker_conv_flops=hardware.worker_conv_flops * factor,
                       worker_dense_flops=hardware.worker_dense_flops * factor, ps_flops=hardware.ps_flops * factor)
    _, _, _, f_tower, f_head = profile.split_sizes(timing.cut)
    conv = TRAIN_FLOPS_FACTOR * timing.batch_size * f_tower / timing.tower_s
    dense = TRAIN_FLOPS_FACTOR * timing.workers * timing.batch_size * f_head / timing.head_s
    return replace(hardware, worker_conv_flops=conv, worker_dense_flops=dense, ps_flops=dense)


def predict(profile, strategy: str, *, workers: int, batch_size: int, hardware: Hardware, ps: int = 1,
            cut: Optional[str] = None, overlap: bool = False, compression: Optional[str] = None,
            timing: Optional[ModelTiming] = None, ps_placement: str = "dedicated") -> Prediction:
    """Predict one training step of ``profile`` under ``strategy`` (see module docstring)."""
    if ps_placement not in PS_PLACEMENTS:
        raise UserError(f"unknown PS placement {ps_placement!r}; choose from {', '.join(PS_PLACEMENTS)}")
    _check_positive("workers", workers)
    _check_positive("batch size", batch_size)
    _check_positive("ps", ps)
    if strategy not in STRATEGIES:
        raise UserError(f"unknown strategy {strategy!r}; choose from {', '.join(STRATEGIES)}")
    comp = parse_compression(compression)
    W, B, S, P = workers, batch_size, ps, profile.params
    if timing is not None:
        hardware = model_hardware(profile, timing, hardware)
    train_full = TRAIN_FLOPS_FACTOR * B * _compute_seconds(profile.flops, profile.dense_flops, hardware)
    if timing is not None and timing.batch_size == B:
        train_full = timing.full_s
    passes = hardware.pass_seconds
    phases: List[_Phase] = []
    worker_fwd = worker_bwd = ps_compute = 0.0
    stages = None
    on_worker = lambda elements, codec, side: _codec_seconds(elements, codec, side, hardware.worker_conv_flops)
    on_ps = lambda elements, codec, side: _codec_seconds(elements, codec, side, hardware.ps_flops)
    worker_codec = ps_codec = 0.0

    colocated = strategy == "ps" and ps_placement == "colocated"
    mean_bytes = None
    if strategy == "ps" and colocated:
        cut = None
        worker_fwd, worker_bwd = train_full / 3, train_full * 2 / 3
        phases, mean_bytes, largest = _colocated_phases(profile.variable_sizes, W, comp)
        ps_compute = passes(largest, W + UPDATE_PASSES)  # the largest shard's sums and update
        worker_codec, ps_codec = on_worker(P, comp, 0), on_ps(largest * W, comp, 1)
    elif strategy == "ps":
        cut = None
        worker_fwd, worker_bwd = train_full / 3, train_full * 2 / 3
        push = _gradient_bytes(P, comp)
        phases = [_Phase("pull parameters", worker_rx=4.0 * P, ps_tx=4.0 * P * W / S),
                  _Phase("push gradients", worker_tx=push, ps_rx=push * W / S)]
        ps_compute = passes(P / S, W + UPDATE_PASSES)  # sum W gradients, then the update
        worker_codec, ps_codec = on_worker(P, comp, 0), on_ps(P * W / S, comp, 1)
        first = profile.first_dense_cut()
        if first is not None:  # (share of the parameters, share of the FLOPs) before the FC layers
            p_conv, _, _, f_conv, _ = profile.split_sizes(first)
            stages = (p_conv / P, f_conv / max(1, profile.flops))
    elif strategy == "horovod":
        cut = None
        worker_fwd, worker_bwd = train_full / 3, train_full * 2 / 3
        if W > 1:
            gathered = comp[0] in ("int8", "topk")  # not summable in a ring: all-gather the payloads
            if gathered:
                each_way = (W - 1) * _gradient_bytes(P, comp)
            else:
                each_way = 2.0 * (W - 1) / W * _gradient_bytes(P, comp)
            name = "all-gather compressed gradients" if gathered else "ring all-reduce"
            phases = [_Phase(name, worker_tx=each_way, worker_rx=each_way, latency_hops=2 * (W - 1))]
            if not gathered:  # fusion copies and the reduce-scatter's sums
                worker_bwd += passes(P, FUSION_PASSES + (W - 1) / W)
            # int8 decodes every rank's payload; top-k scatters them all into one dense buffer
            decoded = W * P if comp[0] == "int8" else P
            worker_codec = on_worker(P, comp, 0) + on_worker(decoded, comp, 1)
        worker_bwd += passes(P, UPDATE_PASSES)  # every rank applies the same update
    else:  # ralp
        cut = cut or profile.first_dense_cut()
        if cut is None:
            raise UserError(f"no split possible: {profile.name} has no dense layer to place on the PS")
        p_tower, p_head, floats, f_tower, f_head = profile.split_sizes(cut)
        head_dense = profile.head_dense_flops(cut)
        tower_train = TRAIN_FLOPS_FACTOR * B * _compute_seconds(
            f_tower, profile.dense_flops - head_dense, hardware)
        measured = timing is not None and timing.cut == cut and timing.batch_size == B and timing.workers == W
        worker_fwd, worker_bwd = tower_train / 3, tower_train * 2 / 3
        acts = _activation_bytes(B * floats, comp)
        push = _gradient_bytes(p_tower, comp)
        phases = [_Phase("pull tower parameters", worker_rx=4.0 * p_tower, ps_tx=4.0 * p_tower * W / S),
                  _Phase("send activations", worker_tx=acts, ps_rx=acts * W),
                  _Phase("receive activation gradients", worker_rx=acts, ps_tx=acts * W),
                  _Phase("push tower gradients", worker_tx=push, ps_rx=push * W / S)]
        head_train = TRAIN_FLOPS_FACTOR * W * B * f_head / hardware.ps_flops
        if measured:
            tower_train, head_train = timing.tower_s, timing.head_s
            worker_fwd, worker_bwd = tower_train / 3, tower_train * 2 / 3
        ps_update = passes(p_tower / S, W + UPDATE_PASSES) + passes(p_head, UPDATE_PASSES)
        ps_compute = head_train + ps_update
        act_comp = _activation_codec(comp)
        # worker: encode activations and tower gradients, decode activation gradients;
        # PS task 0: decode W activations, encode W activation gradients, decode tower gradients.
        worker_codec = (on_worker(B * floats, act_comp, 0) + on_worker(B * floats, act_comp, 1)
                        + on_worker(p_tower, comp, 0))
        ps_codec = (on_ps(W * B * floats, act_comp, 1) + on_ps(W * B * floats, act_comp, 0)
                    + on_ps(W * p_tower / S, comp, 1))

    prediction = _assemble(strategy, cut, W, B, hardware, phases, worker_fwd, worker_bwd, ps_compute, overlap,
                           worker_codec, ps_codec, stages)
    if mean_bytes is not None:  # colocated: the mean host's bytes, no PS host
        prediction = replace(prediction, worker_tx_bytes=mean_bytes[0], worker_rx_bytes=mean_bytes[1],
                             ps_tx_bytes=0.0, ps_rx_bytes=0.0)
    return prediction


def _colocated_phases(sizes, W, comp):
    """Pull and push phases of sync PS with one PS task on each of W worker hosts.

    Host i holds shard P_i: it pulls the other shards (4(P - P_i)) while serving its own to
    the W-1 other workers (4(W-1)P_i), then pushes the other shards' gradients while
    receiving W-1 gradients of its own. Both happen on its one full-duplex link, so each
    phase lasts as long as the busiest direction of the busiest host: the phase carries
    the per-direction maxima. Returns (phases, mean (tx, rx) per host, largest shard)."""
    from ralp.sharding import shard_loads

    shards = shard_loads(sizes, W)
    P = float(sum(shards))
    pull = [(4.0 * (W - 1) * p, 4.0 * (P - p)) for p in shards]
    push = [(_gradient_bytes(P - p, comp), (W - 1) * _gradient_bytes(p, comp)) for p in shards]
    phases = [_Phase("pull parameters", worker_tx=max(t for t, _ in pull), worker_rx=max(r for _, r in pull)),
              _Phase("push gradients", worker_tx=max(t for t, _ in push), worker_rx=max(r for _, r in push))]
    mean_tx = sum(a[0] + b[0] for a, b in zip(pull, push)) / W
    mean_rx = sum(a[1] + b[1] for a, b in zip(pull, push)) / W
    return phases, (mean_tx, mean_rx), max(shards)


def _staged_ps_step(durations, stages, fwd, bwd, codec):
    """Sync PS step with the overlap TensorFlow's executor gives it: every parameter pull
    starts with the step, as concurrent RPCs sharing the link, so the conv parameters (few
    and small beside the FC matrices) arrive early and the conv layers' forward runs while
    the FC weights are still coming; in the backward pass the FC gradients are ready first
    and are pushed while the conv layers' gradients are computed. Within the conv tower
    nothing overlaps: its tensors share the link fairly and arrive together (RALP's tower
    is priced the same way: pull, compute, push). Measured on the emulated cluster: the
    unstaged sum was 25-35% above sync PS's step time on FC-heavy models. ``stages`` = (conv share of the parameters, conv share of the FLOPs);
    ``durations`` = (pull, push) phase times. Returns the worker's busy time up to the
    last gradient arriving on the PS."""
    pull, push = durations
    p_conv, f_conv = stages
    fwd_conv, fwd_fc = fwd * f_conv, fwd * (1 - f_conv)
    bwd_conv, bwd_fc = bwd * f_conv, bwd * (1 - f_conv)
    forward_done = max(pull, pull * p_conv + fwd_conv) + fwd_fc
    fc_pushed = forward_done + bwd_fc + push * (1 - p_conv)
    conv_ready = forward_done + bwd_fc + bwd_conv + codec
    return max(fc_pushed, conv_ready) + push * p_conv


def _assemble(strategy, cut, W, B, hardware, phases, worker_fwd, worker_bwd, ps_compute, overlap,
              worker_codec=0.0, ps_codec=0.0, stages=None):
    worker_Bps, ps_Bps, lat = hardware.worker_bandwidth / 8, hardware.ps_bandwidth / 8, hardware.latency_s
    ps_compute += ps_codec
    breakdown = {"worker_forward_s": worker_fwd, "worker_backward_s": worker_bwd, "ps_compute_s": ps_compute}
    if worker_codec or ps_codec:
        breakdown.update(worker_codec_s=worker_codec, ps_codec_s=ps_codec)
    comm = worker_link_busy = ps_link_busy = 0.0
    for ph in phases:
        worker_side = max(ph.worker_tx, ph.worker_rx) / worker_Bps
        ps_side = max(ph.ps_tx, ph.ps_rx) / ps_Bps
        duration = max(worker_side, ps_side) + ph.latency_hops * lat
        breakdown[ph.name.replace(" ", "_") + "_s"] = duration
        comm += duration
        worker_link_busy += worker_side
        ps_link_busy += ps_side
    totals = {key: sum(getattr(ph, key) for ph in phases) for key in ("worker_tx", "worker_rx", "ps_tx", "ps_rx")}
    worker_compute = worker_fwd + worker_bwd + worker_codec
    if overlap and phases:
        # Full duplex, perfectly pipelined: each direction of each link is its own resource.
        latency = sum(ph.latency_hops for ph in phases) * lat
        worker_link_busy = max(totals["worker_tx"], totals["worker_rx"]) / worker_Bps
        ps_link_busy = max(totals["ps_tx"], totals["ps_rx"]) / ps_Bps
        comm = max(worker_link_busy, ps_link_busy) + latency
        step = max(worker_compute, ps_compute, comm)
    elif stages is not None and len(phases) == 2:
        durations = [breakdown[ph.name.replace(" ", "_") + "_s"] for ph in phases]
        step = _staged_ps_step(durations, stages, worker_fwd, worker_bwd, worker_codec) + ps_compute
    else:
        step = worker_compute + ps_compute + comm
    busy = {"worker compute": worker_compute, "PS compute": ps_compute,
            "PS link": ps_link_busy, "worker link": worker_link_busy}
    bottleneck = max(BOTTLENECKS, key=lambda name: busy[name])
    breakdown.update({"worker_link_busy_s": worker_link_busy, "ps_link_busy_s": ps_link_busy})
    return Prediction(
        strategy=strategy, cut=cut, workers=W, batch_size=B, step_time_s=step,
        compute_s=worker_compute + ps_compute, comm_s=comm, bottleneck=bottleneck,
        worker_tx_bytes=totals["worker_tx"], worker_rx_bytes=totals["worker_rx"],
        ps_tx_bytes=totals["ps_tx"], ps_rx_bytes=totals["ps_rx"], breakdown=breakdown)
