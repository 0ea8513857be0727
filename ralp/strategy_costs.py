"""One cost function per strategy: which bytes cross which link, and what each side computes.

Each function reads the same ``Setting`` (ralp/step_cost.py) (model profile, W workers on W/k hosts of k each, B
images, S PS tasks, codec, hardware, the model's measured step) and returns a ``StepCost``: the
transfer phases (the bytes) and the step as ordered, dependent stages (ralp/evaluator.py). A phase's worker bytes are one worker's share of its
host's network traffic (the host's NIC carries k times as much, ``Hardware.worker_link_Bps``
gives each worker 1/k of it); what goes between devices of one host is the phase's ``intra``.
The one evaluator turns any StepCost into a predicted step time the same way for every strategy
(ralp/cost_model.py ``_assemble``), so a new strategy is one new function here and one entry in
``COST_FUNCTIONS``, with no timing of its own.
The formulas are in ralp/cost_model.py's docstring.
"""
from typing import Callable, Dict, Tuple

from ralp.errors import UserError
from ralp.buckets import MIB, buckets
from ralp.colocated_ps_cost import colocated_ps_cost
from ralp.head_chain import head_chain
from ralp.step_cost import (BESIDE, FUSION_PASSES, LAST_CONV_SHARE, TRAIN_FLOPS_FACTOR, UPDATE_PASSES,
                            Phase, Setting, StepCost, activation_bytes, activation_codec, collective_phase,
                            compute_seconds, gradient_bytes, hierarchical_phases, shared_memory_seconds,
                            sync_ps_stages, tower_layers, transport_seconds)


def sync_ps_cost(s: Setting) -> StepCost:
    """Sync PS: every worker pulls all parameters and pushes all gradients (``sync_ps_stages``)."""
    if s.ps_placement == "colocated":
        return colocated_ps_cost(s)
    P, W, S, comp = s.P, s.W, s.S, s.comp
    push = gradient_bytes(P, comp)
    pull_ph = Phase("pull parameters", worker_rx=4.0 * P, ps_tx=4.0 * P * W / S)
    push_ph = Phase("push gradients", worker_tx=push, ps_rx=push * W / S)
    ps_compute = s.ps_passes(P / S, W + UPDATE_PASSES)  # sum W gradients, then the update
    worker_codec, ps_codec = s.on_worker(P, comp, 0), s.on_ps(P * W / S, comp, 1)
    transport = (transport_seconds(s, received=4.0 * P), transport_seconds(s, sent=push))
    fc_ahead = LAST_CONV_SHARE if S == 1 else 0.0  # FC bytes ahead of the last conv tensor (sync_ps_stages)
    stages = sync_ps_stages(s, pull_ph, push_ph, worker_codec, ps_compute + ps_codec, transport, fc_ahead)
    return StepCost([pull_ph, push_ph], stages, s.train_full / 3, s.train_full * 2 / 3, ps_compute,
                    worker_codec, ps_codec)


def ring_allreduce_cost(s: Setting) -> StepCost:
    """Horovod: the forward, the backward, then a ring all-reduce of the gradients (an all-gather
    for codecs a ring cannot sum), one ring over every worker, several per host or not
    (``collective_phase``), or, asked for, Horovod's hierarchical all-reduce
    (``hierarchical_phases``); every rank applies the same update."""
    P, W, comp = s.P, s.W, s.comp
    phases, bwd, codec = [], s.train_full * 2 / 3, 0.0
    if W > 1:
        gathered = comp[0] in ("int8", "topk")  # not summable in a ring: all-gather the payloads
        name = "all-gather compressed gradients" if gathered else "ring all-reduce"
        payload = gradient_bytes(P, comp)
        if s.hierarchical and not gathered:
            phases = hierarchical_phases(s, payload)
        else:
            phases = [collective_phase(s, name, payload, gathered)]
        bwd += sum(shared_memory_seconds(s, ph) for ph in phases)
        if not gathered:  # fusion copies and the reduce-scatter's sums
            bwd += s.passes(P, FUSION_PASSES + (W - 1) / W)
        # int8 decodes every rank's payload; top-k scatters them all into one dense buffer
        decoded = W * P if comp[0] == "int8" else P
        codec = s.on_worker(P, comp, 0) + s.on_worker(decoded, comp, 1)
    bwd += s.passes(P, UPDATE_PASSES)  # every rank applies the same update
    fwd = s.train_full / 3
    stages = [s.compute("forward", fwd, phase="forward"),
              s.compute("backward and update", bwd, ["forward"], phase="backward"),
              s.compute("codec", codec, ["backward and update"], phase="worker codec")]
    for ph in phases:
        stages.append(s.transfer(ph, [stages[-1].name]))
    return StepCost(phases, stages, fwd, bwd, worker_codec=codec)


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
    tower_train = TRAIN_FLOPS_FACTOR * B * compute_seconds(f_tower, profile.dense_flops - head_dense, s.hardware)
    head_train = TRAIN_FLOPS_FACTOR * W * B * f_head / s.hardware.ps_flops
    if timing is not None and timing.cut == cut and timing.batch_size == B and timing.workers == W:
        tower_train, head_train = timing.tower_s, timing.head_s
    return cut, p_tower, p_head, floats, tower_train, head_train


def fc_on_ps_cost(s: Setting) -> StepCost:
    """RALP: the tower on the workers, the head on PS task 0; activations cross the links. The
    step: pull the tower, its forward, activations up, the head's forward and input gradients on
    the PS, activation gradients down, the tower's backward with its gradients streaming out
    (``streamed``), the PS's sums and update of the tower; the head's weight gradients and update
    run on the PS beside the workers' backward (``head_beside_backward``)."""
    W, B, S, comp = s.W, s.B, s.S, s.comp
    cut, p_tower, p_head, floats, tower_train, head_train = _split(s)
    acts = activation_bytes(B * floats, comp)
    push = gradient_bytes(p_tower, comp)
    act_comp = activation_codec(comp)
    phases = [Phase("pull tower parameters", worker_rx=4.0 * p_tower, ps_tx=4.0 * p_tower * W / S),
              Phase("send activations", worker_tx=acts, ps_rx=acts * W),
              Phase("receive activation gradients", worker_rx=acts, ps_tx=acts * W),
              Phase("push tower gradients", worker_tx=push, ps_rx=push * W / S)]
    # worker: encode activations and tower gradients, decode activation gradients;
    # PS task 0: decode W activations, encode W activation gradients, decode tower gradients.
    worker_codec = (s.on_worker(B * floats, act_comp, 0) + s.on_worker(B * floats, act_comp, 1)
                    + s.on_worker(p_tower, comp, 0))
    ps_codec = (s.on_ps(W * B * floats, act_comp, 1) + s.on_ps(W * B * floats, act_comp, 0)
                + s.on_ps(W * p_tower / S, comp, 1))
    beside = head_beside_backward(s, head_train, p_head)
    tower_update = s.ps_passes(p_tower / S, W + UPDATE_PASSES)
    ps_compute = head_train + tower_update + s.ps_passes(p_head, UPDATE_PASSES)
    stages = [s.transfer(phases[0]),
              s.compute("forward", tower_train / 3, [phases[0].name], phase="forward"),
              s.compute("codec", worker_codec, ["forward"], phase="worker codec"),
              s.transfer(phases[1], ["codec"]),
              s.compute("head", ps_compute - tower_update - beside + ps_codec, [phases[1].name], on_ps=True,
                        phase="ps compute"),
              s.transfer(phases[2], ["head"]),
              s.compute(BESIDE, beside, [phases[2].name], on_ps=True, phase="ps compute")]
    backward = s.streamed(tower_train * 2 / 3, phases[3], tower_layers(s.profile, cut), [phases[2].name])
    stages += backward
    stages.append(s.compute("tower sums and update", tower_update, [st.name for st in backward], on_ps=True,
                            phase="ps compute"))
    return StepCost(phases, stages, tower_train / 3, tower_train * 2 / 3, ps_compute, worker_codec, ps_codec, cut=cut)


def head_beside_backward(s: Setting, head_train: float, p_head: float, shards: int = 1) -> float:
    """The head's PS work that does not hold up the workers: its weight gradients (a third of its
    training FLOPs: forward, input gradients, weight gradients) and its momentum update. In the
    one TensorFlow graph of a step (strategies/ralp_placement.py, strategies/ralp_hybrid.py) they depend only on the
    head's upstream gradient, so the PS runs them while the workers run the tower's backward.
    Measured on the emulated cluster (prediction over measurement - 1): without this RALP's step
    was over-predicted in every compute-bound cell (alexnet_cifar +22%, lenet_mnist +11% at
    1 Gbit/s; runs 20261204T232825Z-fc7d7e, 20261204T215937Z-80a7b0) and the hybrid's (+19%,
    +15%); with it -5% to +13% there, and every cell of the paper run stays within +-20%.
    ``shards``: the PS tasks the head is split over (each does 1/shards of it). With pipelined
    micro-batches (m > 1) the weight gradients stay inside the pipeline; the update, once after
    it, runs beside the workers' ring."""
    update = s.ps_passes(p_head / shards, UPDATE_PASSES)
    return update if s.micro_batches > 1 else head_train / 3 / shards + update


def hybrid_cost(s: Setting) -> StepCost:
    """Hybrid (strategies/ralp_hybrid.py): the tower data-parallel, its gradients ring-all-reduced among the
    workers in buckets of whole layers (``ring_buckets``; each laid end to end: a copy in and out,
    (W-1)/W sums, every replica's update), each bucket's ring leaving as the backward passes its
    layers (``streamed``; one bucket: after the whole backward); the head on the PS, fed by
    activations, its weight gradients and update beside the backward (``head_beside_backward``).
    With S > 1 PS tasks the head's Dense chain is sharded over them (strategies/sharded_head.py,
    ``_sharded_head``): activations go up in feature slices and the PS tasks exchange partial sums
    (fp32). With m micro-batches each micro-batch's forward, activations, head, activation
    gradients and backward are stages of their own (``_micro_batches``): the evaluator runs them
    as a pipeline, each micro-batch paying its own latencies; the rings and the updates follow
    once. The rings' latency counts once (2(W-1) hops): each bucket's ring runs beside the
    others, so their hops overlap. Codecs (``CODECS_OF``): activations and their gradients
    encoded by the sender, decoded by the receiver; every ring hop carries the codec's payload,
    so a worker encodes P_tower (its W-1 reduce-scatter chunks and its finished one) and decodes
    (2W-1)/W P_tower (W-1 incoming partial sums, every finished chunk)."""
    W, B, S, m, comp = s.W, s.B, s.S, s.micro_batches, s.comp
    _check_hybrid(s)
    cut, p_tower, p_head, floats, tower_train, head_train = _split(s)
    acts, act_comp = activation_bytes(B * floats, comp), activation_codec(comp)
    forward, backward, ps_sums = _sharded_head(s, cut) if S > 1 else ([], [], 0.0)
    send = Phase("send activations", worker_tx=acts, ps_rx=acts * W / S)
    ret = Phase("receive activation gradients", worker_rx=acts, ps_tx=acts * W / S)
    phases = [send] + forward + backward + [ret]
    rest_bwd = s.passes(p_tower, UPDATE_PASSES)  # the backward's work after the tower's own, per replica
    worker_codec = s.on_worker(B * floats, act_comp, 0) + s.on_worker(B * floats, act_comp, 1)
    ps_codec = s.on_ps(W * B * floats / S, act_comp, 1) + s.on_ps(W * B * floats / S, act_comp, 0)
    ring, groups = None, ((1.0, 1.0),)
    if W > 1:
        ring = collective_phase(s, "ring all-reduce tower gradients", gradient_bytes(p_tower, comp))
        phases.append(ring)
        groups = ring_buckets(s, cut)
        rest_bwd += shared_memory_seconds(s, ring) + s.passes(p_tower, FUSION_PASSES + (W - 1) / W)
        worker_codec += s.on_worker(p_tower, comp, 0) + s.on_worker((2 * W - 1) / W * p_tower, comp, 1)
    head = head_train / S + ps_sums  # each PS task holds 1/S of every head layer
    update = s.ps_passes(p_head / S, UPDATE_PASSES)
    beside = head_beside_backward(s, head_train, p_head, S)
    worker_bwd = tower_train * 2 / 3 + rest_bwd
    if m > 1:
        stages, returned = _micro_batches(s, tower_train, head + ps_codec, send, forward, backward, ret)
        stages += [s.compute("codec", worker_codec, ["backward"], phase="worker codec"),
                   s.compute("update", rest_bwd, ["codec"], phase="backward")]
        if ring is not None:
            stages.append(s.transfer(ring, ["update"]))
    else:
        stages, returned = _whole_batch(s, tower_train / 3, worker_codec, head + update - beside + ps_codec,
                                        send, forward, backward, ret)
        if ring is not None and len(groups) > 1:
            # the ring's buckets leave under the backward; the fusion copies, sums and update go with them
            stages += s.streamed(worker_bwd, ring, groups, returned)
        else:
            stages.append(s.compute("backward", worker_bwd, returned, phase="backward"))
            if ring is not None:
                stages.append(s.transfer(ring, ["backward"]))
    stages.append(s.compute(BESIDE, beside, returned, on_ps=True, phase="ps compute"))
    return StepCost(phases, stages, tower_train / 3, worker_bwd, ps_compute=head + update,
                    worker_codec=worker_codec, ps_codec=ps_codec, cut=cut, micro_batches=m)


def _check_hybrid(s: Setting):
    """What the hybrid cannot run, refused in one line: a codec its ring cannot re-encode at every
    hop, micro-batches that do not divide the batch."""
    if s.comp[0] is not None and s.comp[0] not in CODECS_OF["ralp-hybrid"]:
        raise UserError("ralp-hybrid's ring re-encodes partial sums at every hop; use --compression fp16 or int8")
    if s.B % s.micro_batches:
        raise UserError(f"batch size {s.B} does not split into {s.micro_batches} equal micro-batches; "
                        "choose micro-batches that divide the batch size")


def _whole_batch(s: Setting, forward_s: float, codec: float, head: float, send: Phase, forward, backward,
                 ret: Phase):
    """The split step up to the tower's backward, one batch at once: its forward, the codecs,
    activations up, the sharded head's exchanges around the head's critical part on the PS,
    activation gradients down. Returns (the stages, [the return's name])."""
    stages = [s.compute("forward", forward_s, phase="forward"),
              s.compute("codec", codec, ["forward"], phase="worker codec"),
              s.transfer(send, ["codec"])]
    for ph in forward:
        stages.append(s.transfer(ph, [stages[-1].name]))
    stages.append(s.compute("head", head, [stages[-1].name], on_ps=True, phase="ps compute"))
    for ph in backward + [ret]:
        stages.append(s.transfer(ph, [stages[-1].name]))
    return stages, [ret.name]


def _micro_batches(s: Setting, tower_train: float, head: float, send: Phase, forward, backward, ret: Phase):
    """The hybrid's pipelined part as m micro-batches of stages (``s.micro_batches``): each one's
    tower forward, its activations up, the sharded head's exchanges (``forward``, ``backward``:
    ``_sharded_head``'s phases), the head on the PS, its
    activation gradients down and its tower backward, each with 1/m of the work and bytes and
    all of its transfers' latency. Nothing orders one micro-batch's stages against another's but
    the resources they share, so the evaluator overlaps them as the executor does. Returns (the
    stages, ending with the last backward, called "backward"; the names of the returns)."""
    m = s.micro_batches
    stages, returns = [], []
    for j in range(m):
        fwd = s.compute(f"forward {j}", tower_train / 3 / m, [f"forward {j - 1}"] if j else [], phase="forward")
        stages.append(fwd)
        stages.append(s.transfer(send, [fwd.name], 1.0 / m, f"{send.name} {j}", hops=1.0))
        for ph in forward:
            stages.append(s.transfer(ph, [stages[-1].name], 1.0 / m, f"{ph.name} {j}", hops=1.0))
        stages.append(s.compute(f"head {j}", head / m, [stages[-1].name], on_ps=True, phase="ps compute"))
        for ph in backward:
            stages.append(s.transfer(ph, [stages[-1].name], 1.0 / m, f"{ph.name} {j}", hops=1.0))
        stages.append(s.transfer(ret, [stages[-1].name], 1.0 / m, f"{ret.name} {j}", hops=1.0))
        returns.append(stages[-1].name)
    for j in range(m):
        name = "backward" if j == m - 1 else f"backward {j}"
        stages.append(s.compute(name, tower_train * 2 / 3 / m, [returns[j]], phase="backward"))
    return stages, returns


def ring_buckets(s: Setting, cut: str) -> Tuple[Tuple[float, float], ...]:
    """The hybrid's ring buckets over the tower's layers (``tower_layers``), forward order, as
    (share of the backward's FLOPs, share of the ring's bytes): ralp/buckets.py ``buckets``, the
    rule strategies/ralp_hybrid.py runs, on each layer's fp32 gradient bytes. (The profile's parameters
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
        forward.append(Phase(f"PS all-reduce layer {i} outputs", ps_tx=ring, ps_rx=ring,
                              latency_hops=2 * (S - 1)))
        backward.insert(0, Phase(f"PS all-reduce layer {i + 1} input gradients", ps_tx=ring, ps_rx=ring,
                                  latency_hops=2 * (S - 1)))
        sums += 2 * s.ps_passes(N * widths[i], (S - 1) / S)
    logits = 4.0 * N * widths[last] * (S - 1) * (1.0 if last % 2 == 0 else 1.0 / S)
    forward.append(Phase("gather logits on PS 0", ps_rx=logits))
    backward.insert(0, Phase("scatter logit gradients from PS 0", ps_tx=logits))
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
