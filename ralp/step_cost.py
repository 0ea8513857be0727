"""What a strategy's priced step is made of, and the pieces every cost function builds it from.

A cost function (ralp/strategy_costs.py, ralp/colocated_ps_cost.py) reads a ``Setting`` (model
profile, W workers on W/k hosts of k each, B images, S PS tasks, codec, hardware, the model's
measured step) and returns a ``StepCost``: its transfer ``Phase``s and the compute on each side.
The bytes of a gradient or activation under a codec, the codecs' and the transport's CPU passes,
one ring over the workers (``collective_phase``) and the tower's layers in backward order are
here once, so every strategy prices them alike and no cost function imports another's privates.
"""
from dataclasses import dataclass, replace
from typing import Dict, List, Optional, Sequence, Tuple

from ralp.codec_spec import parse_codec
from ralp.evaluator import (INTRA, PCIE, PS_CPU, PS_RX, PS_TX, WORKER_CPU, WORKER_RX, WORKER_TX, Stage,
                            on_host)
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
# The share of a one-PS-task pull's FC bytes that reach a worker before its last conv tensor does.
# TensorFlow asks for every parameter at the step's start and the PS serves them all at once over
# one connection, with no priority for the small ones: where each conv tensor lands among the FC
# bytes changes from step to step, and the forward waits for the last of them. It also changes
# with the machine's state. TF 2.15's rendezvous log (TF_CPP_VMODULE=base_rendezvous_mgr=2; one
# PS, 2 workers, 1 Gbit/s, 0.67 cores per host), the time of the last conv tensor as a share of the
# pull's: 2026-12-06 (710b088), alexnet_cifar, 0.32-0.43; 2026-12-07, alexnet_cifar's two workers
# 0.71 and 0.59 on average (9 steps each, every one from 0.34 to 1.0), lenet_mnist's 0.74 and 0.93
# (11 steps). The same cell measured 0.47-0.50 s a step on 2026-12-05 and 0.66-0.73 s on
# 2026-12-07, the 2026-12-05 commit too, run beside today's (0.696 and 0.729 s): the machine
# changed, not the code. 0.6 is the middle of what was measured: ./ci/main's alexnet_cifar cell,
# 12-39% above the model with one send buffer (4 MiB) of FC bytes first (over 20% in 11 of 14
# runs, 2026-12-06/07), is +7% to +16% on the 10 such rows at hand; 2026-12-05's (then -1%, +5%)
# would be about -13% and -7% (scaled by today's model ratio); lenet_mnist's -2% become 0%.
LAST_CONV_SHARE = 0.6
BESIDE = "head beside the backward"  # split strategies: the stage of the PS's work beside the workers' backward


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

    # ---- the step's stages (ralp/evaluator.py), priced at this Setting's rates ----

    def link_work(self, phase: "Phase", share: float = 1.0) -> Dict[str, float]:
        """Seconds of each link direction ``share`` of ``phase``'s bytes take: a worker's bytes at
        its share of its host's NIC (``Hardware.worker_link_Bps``; staged in host memory first,
        ``host_copy``: the NIC's share alone), a PS task's at its link, a device's bytes to its
        host's other devices at their own link (none on CPU hosts: priced as compute)."""
        hw, k = self.hardware, self.k
        nic = hw.worker_bandwidth / 8 / k if phase.host_copy else hw.worker_link_Bps(k)
        ps = hw.ps_link_Bps()
        work = {WORKER_TX: share * phase.worker_tx / nic, WORKER_RX: share * phase.worker_rx / nic,
                PS_TX: share * phase.ps_tx / ps, PS_RX: share * phase.ps_rx / ps}
        if phase.intra and hw.intra_host_bandwidth:
            work[INTRA] = share * phase.intra / hw.intra_host_bandwidth
        return work

    def transfer(self, phase: "Phase", after: Sequence[str] = (), share: float = 1.0, name: Optional[str] = None,
                 hops: Optional[float] = None, flow: Optional[str] = None) -> Stage:
        """``share`` of ``phase`` as a stage: its link seconds, and ``hops`` of its latency (by
        default ``share`` of them: a transfer cut in pieces pays its latency once; a micro-batch's
        copy of a pipelined phase pays all of it). Staged in host memory (``host_copy``), the copy
        to the host and back runs around the transfer, on the device's PCIe link. ``flow``: the
        flow it is part of, sharing its links with other flows (ralp/evaluator.py ``Stage``)."""
        work = self.link_work(phase, share)
        latency = phase.latency_hops * self.hardware.latency_s * (share if hops is None else hops)
        hold = None
        if phase.host_copy and self.hardware.host_device_bandwidth:
            work[PCIE] = share * phase.host_copy / self.hardware.host_device_bandwidth
            hold = max(v for r, v in work.items() if r != PCIE) + latency + work[PCIE]
        return Stage(name or phase.name, work, tuple(after), latency, hold, phase=phase.name, flow=flow)

    def compute(self, name: str, seconds: float, after: Sequence[str] = (), on_ps: bool = False,
                phase: Optional[str] = None) -> Stage:
        """``seconds`` of a worker's CPU (or device), or ``on_ps`` of the PS task's: its own host's,
        or, with the PS task beside the worker (``ps_placement="colocated"``), the worker's."""
        resource = PS_CPU if on_ps and self.ps_placement != "colocated" else WORKER_CPU
        return Stage(name, {resource: seconds}, tuple(after), phase=phase)

    def streamed(self, backward_s: float, phase: "Phase", layers, after: Sequence[str],
                 prefix: str = "backward", transport_s: float = 0.0, flow: Optional[str] = None) -> List[Stage]:
        """The backward pass layer by layer, last to first (``layers``: (share of its FLOPs, share of
        ``phase``'s bytes) in forward order), each layer's share of ``phase`` leaving as soon as its
        backward is done: TensorFlow's executor sends each variable's gradient when it is computed,
        so the last conv layers (most of the parameters) travel while the earlier layers' backward
        still runs. Measured on the emulated cluster: the unstreamed sum over-predicted RALP's step
        on every FC-heavy cell, by 14-26% on AlexNet and VGG-16 at 2 workers on links scaled to
        V100 + 10 GbE and H100 + 400G (run 20261203T171937Z-30296c; streamed: 1-12%), and sync PS's
        step on resnet_cifar by up to 24% (runs 20261204T232825Z-fc7d7e, 20261205T002747Z-c379c0;
        streamed: -11% to +8%). One layer: the backward, then the whole transfer. ``transport_s``: the
        CPU TensorFlow's transport spends sending it (``transport_seconds``), each layer's share
        after its backward; ``flow``: as for ``transfer``."""
        stages, prev = [], tuple(after)
        for i, (flops, params) in enumerate(reversed(layers)):
            if flops <= 0 and params <= 0:
                continue
            b = self.compute(f"{prefix} {i}", backward_s * flops, prev, phase=prefix)
            stages.append(b)
            if transport_s:
                b = self.overhead(f"{prefix} {i} transport", transport_s * flops, (b.name,), "transport push cpu")
                stages.append(b)
            if params > 0:
                stages.append(self.transfer(phase, (b.name,), params, name=f"{phase.name} {i}", flow=flow))
            prev = (b.name,)
        return stages

    def overhead(self, name: str, seconds: float, after: Sequence[str], phase: str) -> Stage:
        """CPU seconds of TensorFlow's transport on the worker's host (``transport_seconds``): on
        the step's path, left out of the bound (ralp/evaluator.py ``bound``)."""
        return Stage(name, {WORKER_CPU: seconds}, tuple(after), phase=phase, overhead=True)


@dataclass
class StepCost:
    """One strategy's step: what crosses the links (``phases``: the bytes, per worker and per PS
    task), and the step itself as ordered, dependent ``stages`` (ralp/evaluator.py), which the
    evaluator alone turns into time; the compute totals are the breakdown's."""
    phases: List[Phase]
    stages: List[Stage]
    worker_fwd: float
    worker_bwd: float
    ps_compute: float = 0.0
    worker_codec: float = 0.0
    ps_codec: float = 0.0
    cut: Optional[str] = None
    mean_bytes: Optional[Tuple[float, float]] = None  # colocated PS: the mean host's (tx, rx); bytes reported
    micro_batches: int = 1


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


def sync_ps_stages(s: Setting, pull: Phase, push: Phase, codec: float, ps_work: Optional[float],
                   transport: Tuple[float, float], fc_ahead: float = 0.0,
                   served: Tuple[Sequence[str], Sequence[str]] = ((), ()),
                   flows: Tuple[Optional[str], Optional[str]] = (None, None)) -> List[Stage]:
    """Sync PS's step (both layouts) as TensorFlow's executor runs it: every parameter read starts
    with the step, as concurrent RPCs sharing the link, so the conv forward can run while the last
    of the FC weights are still coming (how early: below); in the backward every layer's
    gradients leave as its backward finishes (``streamed``);
    the PS sums and updates once the last has arrived (``ps_work``; None: the caller adds it).
    ``transport``: the worker host's CPU seconds in TensorFlow's transport during the pull and
    the push (``transport_seconds``), which share its cores with the compute. ``served``: stages
    the conv and the FC parameters wait for besides the pull's own bytes (colocated: the other
    hosts' serving, ralp/colocated_ps_cost.py); ``flows``: the pull's and the pushes' flows,
    which share the links with the other flows on them (ralp/evaluator.py ``Stage``; None: they
    take turns). Measured on the emulated cluster: the unstaged sum was 25-35% above sync PS's
    step time on FC-heavy models.

    The conv parameters come first only as far as the transport lets them: the PS serves every
    read as it is asked for, all at once, so the conv forward waits for the conv parameters and
    ``fc_ahead``, the share of the FC bytes that reach the worker before the last conv tensor (one
    PS task: ``LAST_CONV_SHARE``, measured). Pricing the conv tensors first, or behind one send
    buffer of FC bytes, under-predicted alexnet_cifar's step at 1 Gbit/s by 12-39%.
    Sharded PS tasks (``--ps`` > 1, colocated) pass none: the greedy sharding puts the large FC
    matrices on tasks of their own, so the conv tensors' connections hold few FC bytes; pricing
    that would need each task's share of conv and FC tensors, which the profile does not keep."""
    p_conv, f_conv = conv_fc_stages(s) or (1.0, 1.0)
    p_conv += fc_ahead * (1.0 - p_conv)
    fwd, bwd = s.train_full / 3, s.train_full * 2 / 3
    pull_cpu, push_cpu = transport
    stages = [s.transfer(pull, share=p_conv, name="pull conv parameters", flow=flows[0]),
              s.compute("forward conv", fwd * f_conv, ["pull conv parameters", *served[0]], phase="forward"),
              s.overhead("transport of the conv pull", pull_cpu * f_conv, ["forward conv"], "transport pull cpu")]
    last_pull = ["pull conv parameters"]
    if p_conv < 1.0:
        stages.append(s.transfer(pull, ["pull conv parameters"], 1.0 - p_conv, "pull FC parameters", flow=flows[0]))
        last_pull = ["pull FC parameters"]
    stages += [s.compute("forward FC", fwd * (1.0 - f_conv), ["transport of the conv pull", *last_pull, *served[1]],
                         phase="forward"),
               s.overhead("transport of the FC pull", pull_cpu * (1.0 - f_conv), ["forward FC"], "transport pull cpu")]
    backward = s.streamed(bwd + codec, push, tower_layers(s.profile, None), ["transport of the FC pull"],
                          transport_s=push_cpu, flow=flows[1])
    stages += backward
    if ps_work is not None:
        stages.append(s.compute("PS sums and update", ps_work, [st.name for st in backward], on_ps=True,
                                phase="ps compute"))
    return stages


HOST_RESOURCES = (WORKER_CPU, WORKER_TX, WORKER_RX, INTRA, PCIE)  # what each worker host has of its own


def elsewhere(stages: Sequence[Stage], host: str, outside: Sequence[str] = ()) -> List[Stage]:
    """``stages`` as another worker host runs them, beside the priced host's: named "host: ...",
    on that host's own CPU and links (ralp/evaluator.py ``on_host``), and left out of the
    breakdown, which is the priced host's (no ``phase``). ``outside``: the priced host's stages
    among those they wait for."""
    def named(n):
        return n if n in outside else f"{host}: {n}"
    return [replace(st, name=named(st.name), after=tuple(named(a) for a in st.after), phase=None,
                    work={on_host(r, host) if r in HOST_RESOURCES else r: v for r, v in st.work.items()})
            for st in stages]
