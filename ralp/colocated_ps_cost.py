"""Sync PS in tf_cnn_benchmarks' layout: one PS task beside each worker (``ps_placement="colocated"``).

Why a module of its own: this layout's step is set by its busiest host, which serves its shard,
pulls the others, computes and pushes on one link and one CPU quota, and each of those needs
its own term (bytes per direction, the transport's CPU, the push that overlaps the others'
pulls). It prices a ``Setting`` into a ``StepCost`` like every function in
ralp/strategy_costs.py, from the pieces in ralp/step_cost.py.
"""
from dataclasses import replace

from ralp.sharding import shard_loads
from ralp.step_cost import (UPDATE_PASSES, Phase, Setting, StepCost, conv_fc_stages, gradient_bytes,
                            sync_ps_stages, transport_seconds)


def colocated_ps_cost(s: Setting) -> StepCost:
    """Sync PS with one PS task beside each worker: the phases of ``colocated_phases``, staged
    around the compute as with a dedicated PS (the same executor reads every variable at the
    step's start and pushes each gradient when it is ready). The busiest host (the largest shard)
    also runs its PS task's side of the transport on the CPU its worker computes on: serving its
    shard to the other workers, receiving their gradients, and its own worker's reads and
    gradients through loopback. Without the staging and that CPU the predicted step was 25-29%
    longer than the measured one at 1 Gbit/s (alexnet_cifar, vgg_cifar, 2 and 4 workers, run
    20261204T232825Z-fc7d7e); with them -7% to +1%. Where the links bound the step (50-87 Mbit/s)
    the measured step was still 1.13-1.32x the prediction (run 20261205T002747Z-c379c0), while the
    same transfers alone over gRPC reach 94-95% of line rate: the busiest host's own push shares
    its link with the pulls it serves (``_pushed_during_pull``). With that term every colocated
    cell of alexnet_cifar and vgg_cifar in both runs is predicted within 12% of the measured step,
    as in run 20261205T033401Z-34671f, measured afresh to check it (sweeps/ps-model-check.toml).
    With k workers per host (and so k PS tasks), ``largest`` is the busiest host's share Q (its
    tasks' shards): each of its workers reads all Q floats through loopback, serves 1/k of the
    (W-k) remote reads of Q and receives 1/k of their gradients, all on the host's CPU as the
    transport's local bytes, never as a link."""
    phases, mean_bytes, (largest, task), own = colocated_phases(s.profile.variable_sizes, s.W, s.comp, s.k)
    P, W, k, comp = s.P, s.W, s.k, s.comp
    pull = transport_seconds(s, sent=4.0 * (W - k) * largest / k, received=4.0 * (P - largest), local=4.0 * largest)
    push = transport_seconds(s, sent=gradient_bytes(P - largest, comp),
                             received=(W - k) * gradient_bytes(largest, comp) / k,
                             local=gradient_bytes(largest, comp))
    # the pull holds the busiest host's outgoing link as long as its serving and its own push need
    timed = replace(phases[0], worker_tx=phases[0].worker_tx + _pushed_during_pull(s, largest, conv_fc_stages(s)))
    ps_compute = s.ps_passes(task, s.W + UPDATE_PASSES)  # the largest shard's sums and update
    worker_codec, ps_codec = s.on_worker(s.P, s.comp, 0), s.on_ps(task * s.W, s.comp, 1)
    stages = sync_ps_stages(s, phases[0], phases[1], worker_codec, ps_compute + ps_codec, (pull, push),
                            timed_pull=timed, own=own)
    return StepCost(phases, stages, s.train_full / 3, s.train_full * 2 / 3, ps_compute, worker_codec, ps_codec,
                    mean_bytes=mean_bytes)


def _pushed_during_pull(s: Setting, largest: float, stages) -> float:
    """Bytes the busiest host's own worker pushes while that host still serves its shard.

    The host with the largest shard pulls little (its shard is local), so its worker is
    computing, and then pushing gradients for the other shards, while the other workers are
    still pulling that shard through the same outgoing link. Its push and their pulls share
    the link direction from then on, so the last parameter arrives later by what the push sent
    meanwhile: min(pull bytes left when the push starts, push bytes). The push starts after
    the worker's own pull, its forward and the backward of the FC layers (whose gradients are
    ready first). ``stages``: ``conv_fc_stages(s)``. With k workers on the host: each worker's share of
    the serving (1/k) at its share of the NIC (``Hardware.worker_link_Bps``)."""
    P, W, k = s.P, s.W, s.k
    rate = s.hardware.worker_link_Bps(k)
    serve = 4.0 * (W - k) * largest / k
    fc_flops = 1.0 - stages[1] if stages else 0.0
    start = 4.0 * (P - largest) / rate + s.train_full / 3 + s.train_full * 2 / 3 * fc_flops
    return min(max(0.0, serve - rate * start), gradient_bytes(P - largest, s.comp))


def colocated_phases(sizes, W, comp, k=1):
    """Pull and push phases of sync PS with one PS task beside each of W workers, k per host.

    PS task i sits beside worker i, on host i // k (ranks fill hosts in order), so host h
    holds Q_h, its tasks' shards: its k workers pull the other shards (k x 4(P - Q_h)) while
    it serves Q_h to the W-k workers of other hosts (4(W-k)Q_h), then they push the other
    shards' gradients while it receives W-k gradients of Q_h. Both happen on its one
    full-duplex NIC, so each phase lasts as long as the busiest direction of the busiest
    host: the phase carries the per-direction maxima, per worker (1/k of the host's).
    Returns (phases, mean (tx, rx) per worker, (busiest host's Q, largest task's shard), the busiest
    host's own (pull, push) phases per worker: its real bytes, not the phases' maxima that mix hosts)."""
    shards = shard_loads(sizes, W)
    hosts = [sum(shards[h * k:(h + 1) * k]) for h in range(W // k)]
    P = float(sum(shards))
    pull = [(4.0 * (W - k) * q, k * 4.0 * (P - q)) for q in hosts]
    push = [(k * gradient_bytes(P - q, comp), (W - k) * gradient_bytes(q, comp)) for q in hosts]
    phases = [Phase("pull parameters", worker_tx=max(t for t, _ in pull) / k, worker_rx=max(r for _, r in pull) / k),
              Phase("push gradients", worker_tx=max(t for t, _ in push) / k, worker_rx=max(r for _, r in push) / k)]
    mean_tx = sum(a[0] + b[0] for a, b in zip(pull, push)) / len(hosts) / k
    mean_rx = sum(a[1] + b[1] for a, b in zip(pull, push)) / len(hosts) / k
    h = hosts.index(max(hosts))
    own = (Phase("pull parameters", worker_tx=pull[h][0] / k, worker_rx=pull[h][1] / k),
           Phase("push gradients", worker_tx=push[h][0] / k, worker_rx=push[h][1] / k))
    return phases, (mean_tx, mean_rx), (max(hosts), max(shards)), own
