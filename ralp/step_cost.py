"""What a strategy's priced step is made of, and the pieces every cost function builds it from.

A cost function (ralp/strategy_costs.py, ralp/colocated_ps_cost.py) reads a ``Setting`` (model
profile, W workers on W/k hosts of k each, B images, S PS tasks, codec, hardware, the model's
measured step) and returns a ``StepCost``: its transfer ``Phase``s and the compute on each side.
The bytes of a gradient or activation under a codec, the codecs' and the transport's CPU passes,
one ring over the workers (``collective_phase``) and the tower's layers in backward order are
here once, so every strategy prices them alike and no cost function imports another's privates.
"""
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from ralp.codec_spec import parse_codec
from ralp.hardware import PASS_FLOPS, Hardware

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
HYBRID_BUCKET_MB = 4.0  # bench/core/config.py's default --hybrid-bucket-mb
# Workers on one CPU host exchange all-reduce data through shared memory: the sender copies each
# float in and the receiver copies it out, 16 bytes read or written per float, 4/3 of a pass's 12.
SHARED_MEMORY_PASSES = 16.0 / 12.0


@dataclass
class Phase:
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
    host_copy: float = 0.0   # bytes each worker's device copies to its host and back around the transfer (PCIe)


def parse_compression(compression: Optional[str]):
    """None or a codec spec (ralp/codec_spec.py) -> (kind or None, top-k fraction or None)."""
    spec = parse_codec(compression)
    if spec.kind == "none":
        return None, None
    return spec.kind, (float(spec.fraction) if spec.fraction is not None else None)


def gradient_bytes(values: float, compression) -> float:
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


def activation_bytes(values: float, compression) -> float:
    """Activations and their gradients: fp16/int8 apply; top-k is for gradients only."""
    kind, _ = compression
    return gradient_bytes(values, compression) if kind in ("fp16", "int8") else 4.0 * values


# Elementwise passes per element of the dense tensor (encode, decode), measured with
# strategies/codecs.py on a 4M-float tensor (2-core x86 VM, TF 2.15 CPU, 2026-12-02; runs
# varied by ~30%): one pass is a multiply-and-sum over the tensor, ~2.1 ns per element there.
# Top-k's encode includes its error feedback (add the residual, select, gather, rebuild what
# was sent, update the residual); its decode fills the dense tensor and scatters into it.
CODEC_PASSES = {None: (0.0, 0.0), "fp16": (2.0, 0.75), "int8": (1.6, 0.75), "topk": (15.0, 1.5)}

def codec_seconds(elements: float, compression, side: int, flops: float, pass_s: Optional[float] = None) -> float:
    """Time to encode (side 0) or decode (side 1) ``elements`` floats: ``pass_s`` seconds per
    element and pass (a device's memory bandwidth), else ``PASS_FLOPS`` at ``flops`` FLOP/s."""
    if elements <= 0:
        return 0.0
    if pass_s:
        return elements * CODEC_PASSES[compression[0]][side] * pass_s
    return elements * CODEC_PASSES[compression[0]][side] * PASS_FLOPS / flops


def activation_codec(compression):
    """The codec RALP's activations travel through: top-k leaves them fp32 (no work)."""
    return compression if compression[0] in ("fp16", "int8") else (None, None)


def compute_seconds(flops: float, dense_flops: float, hardware: Hardware) -> float:
    return (flops - dense_flops) / hardware.worker_conv_flops + dense_flops / hardware.worker_dense_flops


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
    hierarchical: bool = False         # Horovod's hierarchical all-reduce (``hierarchical_phases``)

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
        return codec_seconds(elements, codec, side, self.hardware.worker_conv_flops, self.hardware.memory_pass_s())

    def on_ps(self, elements, codec, side):
        return codec_seconds(elements, codec, side, self.hardware.ps_flops, self.hardware.memory_pass_s(True))


@dataclass
class StepCost:
    """One strategy's step before timing: transfers, and compute on the worker and the PS."""
    phases: List[Phase]
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


def conv_fc_stages(s: Setting) -> Optional[Tuple[float, float]]:
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


def collective_phase(s: Setting, name: str, payload: float, gathered: bool = False) -> Phase:
    """An all-reduce (or, ``gathered``, an all-gather) of ``payload`` bytes per worker among the W
    workers, as one ring over all of them in rank order (Gloo's ring, and NCCL's ring with one NIC
    per host; Horovod's opt-in hierarchical all-reduce: ``hierarchical_phases``): each worker sends and
    receives 2(W-1)/W x payload ((W-1) payloads gathered) on its edge of the ring. With k workers
    per host, k-1 of a host's k edges stay inside it and one crosses its NIC, so each host's NIC
    carries 2(W-1)/W x payload each way (each worker's share: 1/k of it, at 1/k of the NIC: the
    same time) and each device moves (k-1)/k of its edge's bytes inside the host. Latency: 2(W-1)
    hops, as for one worker per host."""
    W, k = s.W, s.k
    edge = (W - 1) * payload if gathered else 2.0 * (W - 1) / W * payload
    return Phase(name, worker_tx=edge / k, worker_rx=edge / k, intra=edge * (k - 1) / k,
                  latency_hops=2 * (W - 1))


def hierarchical_phases(s: Setting, payload: float) -> List[Phase]:
    """Horovod's hierarchical all-reduce (HOROVOD_HIERARCHICAL_ALLREDUCE, NCCLHierarchicalAllreduce)
    of ``payload`` bytes per worker, k workers on each of H = W/k hosts, in its three steps:
    a reduce-scatter among a host's k devices ((k-1)/k x payload each way per device, inside the
    host); each device's 1/k shard all-reduced across the hosts by MPI, one ring per local rank,
    from host memory (the shard is copied to the host and back over the device's PCIe link), the
    k rings sharing the host's NIC, which carries 2(H-1)/H x payload each way (each worker's share
    1/k of that, at 1/k of the NIC); then an all-gather inside the host, the first step reversed.
    Against one flat ring (``collective_phase``) the NIC carries 2(H-1)/H instead of 2(W-1)/W of
    the payload, over 2(H-1) hops instead of 2(W-1), for two passes over the devices' own links
    and the copies; with one worker per host it is the flat ring. Inside a host no NIC latency."""
    k, H = s.k, s.H
    if k == 1:
        return [collective_phase(s, "ring all-reduce", payload)]
    shard = payload / k
    inside = (k - 1) / k * payload
    cross = 2.0 * (H - 1) / H * shard
    return [Phase("reduce-scatter inside each host", intra=inside, latency_hops=0),
            Phase("all-reduce shards across hosts", worker_tx=cross, worker_rx=cross,
                  latency_hops=2 * (H - 1), host_copy=2.0 * shard),
            Phase("all-gather inside each host", intra=inside, latency_hops=0)]


def shared_memory_seconds(s: Setting, phase: Phase) -> float:
    """CPU seconds a worker spends moving ``phase.intra`` bytes through its host's shared memory,
    where its host's devices have no link of their own (CPU workers: ``SHARED_MEMORY_PASSES``);
    0 where they have one (NVLink, PCIe peer: priced as a link by the cost model)."""
    if s.hardware.intra_host_bandwidth or not phase.intra:
        return 0.0
    return s.passes(phase.intra / 4.0, SHARED_MEMORY_PASSES)


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
