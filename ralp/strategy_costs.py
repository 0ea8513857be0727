"""One cost function per strategy: which bytes cross which link, and what each side computes.

Each function reads the same ``Setting`` (model profile, W workers on W/k hosts of k each, B
images, S PS tasks, codec, hardware, the model's measured step) and returns a ``StepCost``: the
transfer phases and the compute of a step. A phase's worker bytes are one worker's share of its
host's network traffic (the host's NIC carries k times as much, ``Hardware.worker_link_Bps``
gives each worker 1/k of it); what goes between devices of one host is the phase's ``intra``.
ralp/cost_model.py turns a StepCost into a predicted step time (``_assemble``) the same way for
every strategy, so a new strategy is one new function here and one entry in ``COST_FUNCTIONS``.
The formulas are in ralp/cost_model.py's docstring.
"""
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

from bench.errors import UserError
from ralp.buckets import MIB, buckets
from ralp.codec_spec import parse_codec
from ralp.hardware import Hardware
from ralp.head_chain import head_chain

TRAIN_FLOPS_FACTOR = 3  # forward + backward (two matmuls per forward one)
# Memory-bound passes per element (see module docstring).
UPDATE_PASSES = 2.0       # m = a*m + g; w -= lr*m
FUSION_PASSES = 2.0       # Horovod: copy into and out of the fusion buffer
# TensorFlow's gRPC transport, per float it moves, in passes of the process's CPU: (sending,
# receiving). Measured with both processes' CPU seconds (utime + stime) around 34 MB variable
# reads and writes between two TF servers, on loopback and across an emulated 1 Gbit/s link at
# 0.67 cores per host (2-core VM, TF 2.15, 2026-12-05): the receiver 0.49-0.57 ns per byte, the
# sender 0.03-0.16, at ~0.58 ns per pass-element: serialisation and socket copies.
TRANSPORT_PASSES = (1.0, 3.5)
HYBRID_BUCKET_MB = 4.0  # bench/config.py's default --hybrid-bucket-mb
# Workers on one CPU host exchange all-reduce data through shared memory: the sender copies each
# float in and the receiver copies it out, 16 bytes read or written per float, 4/3 of a pass's 12.
SHARED_MEMORY_PASSES = 16.0 / 12.0


@dataclass
class _Phase:
    """One transfer: bytes each worker sends/receives over the network (its share of its host's
    NIC traffic), each PS task sends/receives, and each worker's device sends (and receives) to the
    other devices of its host (``intra``: never on the network)."""
    name: str
    worker_tx: float = 0.0
    worker_rx: float = 0.0
    ps_tx: float = 0.0
    ps_rx: float = 0.0
    latency_hops: int = 1
    intra: float = 0.0
    pipelined: bool = False  # repeated per micro-batch, overlapping across them (ralp/cost_model.py)


def parse_compression(compression: Optional[str]):
    """None or a codec spec (ralp/codec_spec.py) -> (kind or None, top-k fraction or None)."""
    spec = parse_codec(compression)
    if spec.kind == "none":
        return None, None
    return spec.kind, (float(spec.fraction) if spec.fraction is not None else None)


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
# bench/codecs.py on a 4M-float tensor (2-core x86 VM, TF 2.15 CPU, 2026-12-02; runs
# varied by ~30%): one pass is a multiply-and-sum over the tensor, ~2.1 ns per element there.
# Top-k's encode includes its error feedback (add the residual, select, gather, rebuild what
# was sent, update the residual); its decode fills the dense tensor and scatters into it.
CODEC_PASSES = {None: (0.0, 0.0), "fp16": (2.0, 0.75), "int8": (1.6, 0.75), "topk": (15.0, 1.5)}
# One elementwise pass over one element costs as long as this many conv FLOPs (memory-bound
# vs compute-bound work): 2.1 ns at 37.9 GFLOP/s on the same machine; assumed to carry over
# to other hardware in proportion to its throughput.
PASS_FLOPS = 80.0


def _codec_seconds(elements: float, compression, side: int, flops: float, pass_s: Optional[float] = None) -> float:
    """Time to encode (side 0) or decode (side 1) ``elements`` floats: ``pass_s`` seconds per
    element and pass (a device's memory bandwidth), else ``PASS_FLOPS`` at ``flops`` FLOP/s."""
    if elements <= 0:
        return 0.0
    if pass_s:
        return elements * CODEC_PASSES[compression[0]][side] * pass_s
    return elements * CODEC_PASSES[compression[0]][side] * PASS_FLOPS / flops


def _activation_codec(compression):
    """The codec RALP's activations travel through: top-k leaves them fp32 (no work)."""
    return compression if compression[0] in ("fp16", "int8") else (None, None)


def _compute_seconds(flops: float, dense_flops: float, hardware: Hardware) -> float:
    return (flops - dense_flops) / hardware.worker_conv_flops + dense_flops / hardware.worker_dense_flops


# ----------------------------------------------------------------------------- per strategy

@dataclass(frozen=True)
class Setting:
    """What every cost function reads."""
    profile: object
    W: int
    B: int
    S: int
    comp: Tuple
    hardware: Hardware
    train_full: float                  # the whole model's training step on one worker
    timing: object = None              # ModelTiming, when the model's step was measured
    cut: Optional[str] = None
    ps_placement: str = "dedicated"
    micro_batches: int = 1             # m: the hybrid's pipelined micro-batches per step
    k: int = 1                         # workers per host, sharing its NIC (W/k hosts)
    hybrid_bucket_mb: float = HYBRID_BUCKET_MB  # the hybrid's ring buckets (MiB of fp32 gradients; 0: one)

    @property
    def P(self) -> float:
        return self.profile.params

    @property
    def H(self) -> int:
        """Worker hosts."""
        return self.W // self.k

    def passes(self, elements, count):
        """Memory-bound passes on a worker's device."""
        return self.hardware.pass_seconds(elements, count)

    def ps_passes(self, elements, count):
        """Memory-bound passes on the PS task's device (RALP's head and the PS's sums and updates)."""
        return self.hardware.pass_seconds(elements, count, on_ps=True)

    def on_worker(self, elements, codec, side):
        return _codec_seconds(elements, codec, side, self.hardware.worker_conv_flops, self.hardware.memory_pass_s())

    def on_ps(self, elements, codec, side):
        return _codec_seconds(elements, codec, side, self.hardware.ps_flops, self.hardware.memory_pass_s(True))


@dataclass
class StepCost:
    """One strategy's step before timing: transfers, and compute on the worker and the PS."""
    phases: List[_Phase]
    worker_fwd: float
    worker_bwd: float
    ps_compute: float = 0.0
    worker_codec: float = 0.0
    ps_codec: float = 0.0
    cut: Optional[str] = None
    stages: Optional[Tuple[float, float]] = None   # sync PS's conv/FC overlap (see _staged_ps_step)
    # Sync PS: the busiest worker host's CPU seconds in the transport during the pull and the push
    # (``transport_seconds``); they compete with its compute (see _staged_ps_step).
    transport: Tuple[float, float] = (0.0, 0.0)
    mean_bytes: Optional[Tuple[float, float]] = None  # colocated PS: the mean host's (tx, rx)
    notes: Dict = field(default_factory=dict)
    # Pipelined micro-batches: m, and how much of the worker's and the PS's compute (already
    # inside worker_fwd + worker_bwd and ps_compute) runs per micro-batch in the pipeline
    # with the phases marked ``pipelined``; the rest runs once, after it.
    micro_batches: int = 1
    pipe_worker: float = 0.0
    pipe_ps: float = 0.0
    # RALP: the phase whose gradients stream out during the worker's backward, and the tower's
    # layers in forward order as (share of the backward's FLOPs, share of the gradient bytes).
    streamed: Optional[Tuple[str, Tuple[Tuple[float, float], ...]]] = None
    # Split strategies: PS compute (inside ps_compute) that runs while the workers run their
    # backward, so off the step's critical path up to that long (see head_beside_backward).
    ps_beside_backward: float = 0.0


def sync_ps_cost(s: Setting) -> StepCost:
    """Sync PS: every worker pulls all parameters and pushes all gradients."""
    if s.ps_placement == "colocated":
        from ralp.colocated_ps_cost import colocated_ps_cost  # it builds on this module's pieces
        return colocated_ps_cost(s)
    P, W, S, comp = s.P, s.W, s.S, s.comp
    push = _gradient_bytes(P, comp)
    return StepCost([_Phase("pull parameters", worker_rx=4.0 * P, ps_tx=4.0 * P * W / S),
                     _Phase("push gradients", worker_tx=push, ps_rx=push * W / S)],
                    s.train_full / 3, s.train_full * 2 / 3,
                    ps_compute=s.ps_passes(P / S, W + UPDATE_PASSES),  # sum W gradients, then the update
                    worker_codec=s.on_worker(P, comp, 0), ps_codec=s.on_ps(P * W / S, comp, 1),
                    stages=_stages(s), transport=(transport_seconds(s, received=4.0 * P),
                                                  transport_seconds(s, sent=push)),
                    streamed=("push gradients", tower_layers(s.profile, None)))


def _stages(s: Setting) -> Optional[Tuple[float, float]]:
    """(share of the parameters, share of the FLOPs) before the FC layers; None without FC layers."""
    first = s.profile.first_dense_cut()
    if first is None:
        return None
    p_conv, _, _, f_conv, _ = s.profile.split_sizes(first)
    return (p_conv / s.P, f_conv / max(1, s.profile.flops))


def transport_seconds(s: Setting, sent: float = 0.0, received: float = 0.0, local: float = 0.0) -> float:
    """CPU seconds a host spends in TensorFlow's transport (``TRANSPORT_PASSES``) for the bytes
    its processes send and receive, ``local`` bytes going between two of its own processes (both
    ends paid; they never touch the wire). On an emulated host this is its CPU quota's time."""
    send, receive = TRANSPORT_PASSES
    return s.passes((sent + local) / 4.0, send) + s.passes((received + local) / 4.0, receive)


def collective_phase(s: Setting, name: str, payload: float, gathered: bool = False) -> _Phase:
    """An all-reduce (or, ``gathered``, an all-gather) of ``payload`` bytes per worker among the W
    workers, as one ring over all of them in rank order (Gloo's ring, and NCCL's ring with one NIC
    per host; Horovod's opt-in hierarchical all-reduce is not priced): each worker sends and
    receives 2(W-1)/W x payload ((W-1) payloads gathered) on its edge of the ring. With k workers
    per host, k-1 of a host's k edges stay inside it and one crosses its NIC, so each host's NIC
    carries 2(W-1)/W x payload each way (each worker's share: 1/k of it, at 1/k of the NIC: the
    same time) and each device moves (k-1)/k of its edge's bytes inside the host. Latency: 2(W-1)
    hops, as for one worker per host."""
    W, k = s.W, s.k
    edge = (W - 1) * payload if gathered else 2.0 * (W - 1) / W * payload
    return _Phase(name, worker_tx=edge / k, worker_rx=edge / k, intra=edge * (k - 1) / k,
                  latency_hops=2 * (W - 1))


def shared_memory_seconds(s: Setting, phase: _Phase) -> float:
    """CPU seconds a worker spends moving ``phase.intra`` bytes through its host's shared memory,
    where its host's devices have no link of their own (CPU workers: ``SHARED_MEMORY_PASSES``);
    0 where they have one (NVLink, PCIe peer: priced as a link by the cost model)."""
    if s.hardware.intra_host_bandwidth or not phase.intra:
        return 0.0
    return s.passes(phase.intra / 4.0, SHARED_MEMORY_PASSES)


def ring_allreduce_cost(s: Setting) -> StepCost:
    """Horovod: a ring all-reduce of the gradients (an all-gather for codecs a ring cannot sum),
    one ring over every worker, several per host or not (``collective_phase``)."""
    P, W, comp = s.P, s.W, s.comp
    cost = StepCost([], s.train_full / 3, s.train_full * 2 / 3)
    if W > 1:
        gathered = comp[0] in ("int8", "topk")  # not summable in a ring: all-gather the payloads
        name = "all-gather compressed gradients" if gathered else "ring all-reduce"
        cost.phases = [collective_phase(s, name, _gradient_bytes(P, comp), gathered)]
        cost.worker_bwd += shared_memory_seconds(s, cost.phases[0])
        if not gathered:  # fusion copies and the reduce-scatter's sums
            cost.worker_bwd += s.passes(P, FUSION_PASSES + (W - 1) / W)
        # int8 decodes every rank's payload; top-k scatters them all into one dense buffer
        decoded = W * P if comp[0] == "int8" else P
        cost.worker_codec = s.on_worker(P, comp, 0) + s.on_worker(decoded, comp, 1)
    cost.worker_bwd += s.passes(P, UPDATE_PASSES)  # every rank applies the same update
    return cost


def _split(s: Setting):
    """The split both RALP placements share: (cut, tower and head parameters, activation floats
    per image, the tower's training step at B on a worker, the head's at W x B on the PS), the
    measured seconds when the model's own step was timed at this cut, batch and W."""
    profile, W, B, timing = s.profile, s.W, s.B, s.timing
    cut = s.cut or profile.first_dense_cut()
    if cut is None:
        raise UserError(f"no split possible: {profile.name} has no dense layer to place on the PS")
    p_tower, p_head, floats, f_tower, f_head = profile.split_sizes(cut)
    head_dense = profile.head_dense_flops(cut)
    tower_train = TRAIN_FLOPS_FACTOR * B * _compute_seconds(f_tower, profile.dense_flops - head_dense, s.hardware)
    head_train = TRAIN_FLOPS_FACTOR * W * B * f_head / s.hardware.ps_flops
    if timing is not None and timing.cut == cut and timing.batch_size == B and timing.workers == W:
        tower_train, head_train = timing.tower_s, timing.head_s
    return cut, p_tower, p_head, floats, tower_train, head_train


def fc_on_ps_cost(s: Setting) -> StepCost:
    """RALP: the tower on the workers, the head on PS task 0; activations cross the links."""
    W, B, S, comp = s.W, s.B, s.S, s.comp
    cut, p_tower, p_head, floats, tower_train, head_train = _split(s)
    acts = _activation_bytes(B * floats, comp)
    push = _gradient_bytes(p_tower, comp)
    act_comp = _activation_codec(comp)
    return StepCost(
        [_Phase("pull tower parameters", worker_rx=4.0 * p_tower, ps_tx=4.0 * p_tower * W / S),
         _Phase("send activations", worker_tx=acts, ps_rx=acts * W),
         _Phase("receive activation gradients", worker_rx=acts, ps_tx=acts * W),
         _Phase("push tower gradients", worker_tx=push, ps_rx=push * W / S)],
        tower_train / 3, tower_train * 2 / 3,
        ps_compute=head_train + s.ps_passes(p_tower / S, W + UPDATE_PASSES) + s.ps_passes(p_head, UPDATE_PASSES),
        # worker: encode activations and tower gradients, decode activation gradients;
        # PS task 0: decode W activations, encode W activation gradients, decode tower gradients.
        worker_codec=(s.on_worker(B * floats, act_comp, 0) + s.on_worker(B * floats, act_comp, 1)
                      + s.on_worker(p_tower, comp, 0)),
        ps_codec=(s.on_ps(W * B * floats, act_comp, 1) + s.on_ps(W * B * floats, act_comp, 0)
                  + s.on_ps(W * p_tower / S, comp, 1)),
        cut=cut, streamed=("push tower gradients", tower_layers(s.profile, cut)),
        ps_beside_backward=head_beside_backward(s, head_train, p_head))


def head_beside_backward(s: Setting, head_train: float, p_head: float, shards: int = 1) -> float:
    """The head's PS work that does not hold up the workers: its weight gradients (a third of its
    training FLOPs: forward, input gradients, weight gradients) and its momentum update. In the
    one TensorFlow graph of a step (ralp/placement.py, ralp/hybrid.py) they depend only on the
    head's upstream gradient, so the PS runs them while the activation gradients travel back
    and the workers run the tower's backward. Measured on the emulated cluster (prediction over
    measurement - 1): without this RALP's step was over-predicted in every compute-bound cell
    (alexnet_cifar +22%, lenet_mnist +11% at 1 Gbit/s; runs 20261204T232825Z-fc7d7e,
    20261204T215937Z-80a7b0) and the hybrid's (+19%, +15%); with it -5% to +13% there, and every
    cell of the paper run stays within +-20%.
    ``shards``: the PS tasks the head is split over (each does 1/shards of it). With pipelined
    micro-batches (m > 1) the weight gradients stay inside the pipeline; the update, once after
    it, runs beside the workers' ring."""
    update = s.ps_passes(p_head / shards, UPDATE_PASSES)
    return update if s.micro_batches > 1 else head_train / 3 / shards + update


def tower_layers(profile, cut: Optional[str]) -> Tuple[Tuple[float, float], ...]:
    """The tower's layers (every layer when ``cut`` is None) in forward order as (share of their
    FLOPs, share of their parameters): when each layer's gradients are ready in the backward pass,
    and how much of the push they are. Layers with no FLOPs or no parameters in all count as one
    layer (nothing streams)."""
    tower = profile.tower_layers(cut) if cut is not None else None
    layers = [(float(l.flops), float(l.params)) for l in profile.layers if tower is None or l.name in tower]
    flops, params = sum(f for f, _ in layers), sum(p for _, p in layers)
    if flops <= 0 or params <= 0:
        return ((1.0, 1.0),)
    return tuple((f / flops, p / params) for f, p in layers)


def hybrid_cost(s: Setting) -> StepCost:
    """Hybrid (ralp/hybrid.py): the tower data-parallel, its gradients ring-all-reduced among the
    workers in buckets of whole layers (``ring_buckets``; each laid end to end: a copy in and out,
    (W-1)/W sums, every replica's update), each bucket's ring leaving as the backward passes its
    layers (``streamed``, as RALP's push; one bucket: after the whole backward); the head on the
    PS, fed by activations. With S > 1 PS tasks the head's Dense chain is sharded over them
    (ralp/sharded_head.py, ``_sharded_head``): activations go up in feature slices and the PS
    tasks exchange partial sums (fp32). With m micro-batches the activations, the head and the
    tower's forward and backward form a pipeline; the rings and the updates follow once (no
    overlap priced there). The rings' latency counts once (2(W-1) hops): each bucket's ring
    runs beside the others, so their hops overlap. Codecs (``CODECS_OF``): activations and
    their gradients encoded by the sender, decoded by the receiver; every ring hop carries the
    codec's payload, so a worker encodes P_tower (its W-1 reduce-scatter chunks and its
    finished one) and decodes (2W-1)/W P_tower (W-1 incoming partial sums, every finished
    chunk)."""
    W, B, S, m, comp = s.W, s.B, s.S, s.micro_batches, s.comp
    if comp[0] is not None and comp[0] not in CODECS_OF["ralp-hybrid"]:
        raise UserError("ralp-hybrid's ring re-encodes partial sums at every hop; use --compression fp16 or int8")
    if B % m:
        raise UserError(f"batch size {B} does not split into {m} equal micro-batches; "
                        "choose micro-batches that divide the batch size")
    cut, p_tower, p_head, floats, tower_train, head_train = _split(s)
    acts, act_comp = _activation_bytes(B * floats, comp), _activation_codec(comp)
    forward, backward, ps_sums = _sharded_head(s, cut) if S > 1 else ([], [], 0.0)
    phases = ([_Phase("send activations", worker_tx=acts, ps_rx=acts * W / S, pipelined=True)] + forward + backward
              + [_Phase("receive activation gradients", worker_rx=acts, ps_tx=acts * W / S, pipelined=True)])
    worker_bwd = tower_train * 2 / 3 + s.passes(p_tower, UPDATE_PASSES)
    worker_codec = s.on_worker(B * floats, act_comp, 0) + s.on_worker(B * floats, act_comp, 1)
    streamed = None
    if W > 1:
        groups = ring_buckets(s, cut)
        ring = collective_phase(s, "ring all-reduce tower gradients", _gradient_bytes(p_tower, comp))
        phases.append(ring)
        worker_bwd += shared_memory_seconds(s, ring) + s.passes(p_tower, FUSION_PASSES + (W - 1) / W)
        worker_codec += s.on_worker(p_tower, comp, 0) + s.on_worker((2 * W - 1) / W * p_tower, comp, 1)
        if len(groups) > 1:
            streamed = (ring.name, groups)
    head = head_train / S + ps_sums  # each PS task holds 1/S of every head layer
    return StepCost(phases, tower_train / 3, worker_bwd, ps_compute=head + s.ps_passes(p_head / S, UPDATE_PASSES),
                    worker_codec=worker_codec,
                    ps_codec=s.on_ps(W * B * floats / S, act_comp, 1) + s.on_ps(W * B * floats / S, act_comp, 0),
                    cut=cut, micro_batches=m, pipe_worker=tower_train, pipe_ps=head, streamed=streamed,
                    ps_beside_backward=head_beside_backward(s, head_train, p_head, S))


def ring_buckets(s: Setting, cut: str) -> Tuple[Tuple[float, float], ...]:
    """The hybrid's ring buckets over the tower's layers (``tower_layers``), forward order, as
    (share of the backward's FLOPs, share of the ring's bytes): ralp/buckets.py ``buckets``, the
    rule ralp/hybrid.py runs, on each layer's fp32 gradient bytes. (The profile's parameters
    count batch-norm statistics, which the ring does not carry: a few bytes' difference.)"""
    layers = tower_layers(s.profile, cut)
    p_tower = s.profile.split_sizes(cut)[0]
    groups = buckets([4.0 * p_tower * params for _, params in layers], s.hybrid_bucket_mb * MIB)
    return tuple((sum(layers[i][0] for i in g), sum(layers[i][1] for i in g)) for g in reversed(groups))


def _sharded_head(s: Setting, cut: str):
    """PS-to-PS phases of the head's Dense chain L_0..L_{n-1} (widths H_i) sharded over S tasks,
    L_i split by input rows when i is even and by output columns when odd (Megatron-style), for
    N = W x B rows: after each even L_i but the last, its partial sums (N H_i floats) are
    ring-all-reduced among the S tasks (2(S-1)/S x 4 N H_i bytes each way per task), and so are
    the matching odd layer's input-gradient partial sums in the backward pass. The logits (C =
    H_{n-1}) end on task 0: row-split, the other S-1 tasks send it their partial sums (4 N C
    each) and get the logit gradients back; column-split, their slices (4 N C / S each).
    Returns (forward phases, backward phases, the PS's summing time), task 0's bytes (the
    busiest task: it also gathers the logits); the ring sums (S-1)/S passes, task 0 S-1."""
    W, B, S = s.W, s.B, s.S
    widths, why = head_chain(s.profile, cut)
    if widths is None:
        raise UserError(f"ralp-hybrid cannot shard {s.profile.name}'s head over {S} PS tasks: {why}; use --ps 1")
    N, last = W * B, len(widths) - 1
    forward, backward, sums = [], [], 0.0
    for i in range(0, last, 2):  # even layers that are not the last
        ring = 2.0 * (S - 1) / S * 4.0 * N * widths[i]
        forward.append(_Phase(f"PS all-reduce layer {i} outputs", ps_tx=ring, ps_rx=ring,
                              latency_hops=2 * (S - 1), pipelined=True))
        backward.insert(0, _Phase(f"PS all-reduce layer {i + 1} input gradients", ps_tx=ring, ps_rx=ring,
                                  latency_hops=2 * (S - 1), pipelined=True))
        sums += 2 * s.ps_passes(N * widths[i], (S - 1) / S)
    logits = 4.0 * N * widths[last] * (S - 1) * (1.0 if last % 2 == 0 else 1.0 / S)
    forward.append(_Phase("gather logits on PS 0", ps_rx=logits, pipelined=True))
    backward.insert(0, _Phase("scatter logit gradients from PS 0", ps_tx=logits, pipelined=True))
    if last % 2 == 0:
        sums += s.ps_passes(N * widths[last], S - 1)
    return forward, backward, sums


COST_FUNCTIONS: Dict[str, Callable[[Setting], StepCost]] = {
    "ps": sync_ps_cost, "horovod": ring_allreduce_cost, "ralp": fc_on_ps_cost, "ralp-hybrid": hybrid_cost}
SPLIT_STRATEGIES = ("ralp", "ralp-hybrid")  # priced at a cut
# Strategies priced (and implemented) with some codecs only, the others take all: the hybrid's ring
# re-encodes each partial sum at every hop, so stateless codecs only (CODECS_OF).
CODECS_OF = {"ralp-hybrid": ("fp16", "int8")}
SHARDED_HEAD = ("ralp-hybrid",)             # ps=S > 1 shards the head (elsewhere: the tower / the variables)
PIPELINED = ("ralp-hybrid",)                # micro_batches=m > 1 pipelines the step
