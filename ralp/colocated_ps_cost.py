"""Sync PS in tf_cnn_benchmarks' layout: one PS task beside each worker (``ps_placement="colocated"``).

Why a module of its own: in this layout the hosts do different work at the same time, so its
step is priced on two hosts side by side rather than one: the busiest host (the largest share
of the parameters: it serves the most), which is the priced one, and the host that pulls the
most (the smallest share). Each serves its shard to the others from the step's start, pulls the
rest, computes, pushes, and sums the gradients of its shard, on its own CPU quota and its own
full-duplex NIC. It prices a ``Setting`` into a ``StepCost`` like every function in
ralp/strategy_costs.py, from the pieces in ralp/step_cost.py.

What it leaves out: the other W/k - 2 hosts, whose serving is no larger than the busiest
host's and whose pull no larger than the pulling host's; and which layers a host's shard holds
(the profile does not keep it), so each host's pull and push are split between conv and FC
layers in the whole model's proportions.
"""
from dataclasses import replace
from typing import List

from ralp.evaluator import WORKER_RX, on_host
from ralp.sharding import shard_loads
from ralp.step_cost import (UPDATE_PASSES, Phase, Setting, Stage, StepCost, conv_fc_stages, elsewhere,
                            gradient_bytes, sync_ps_stages, transport_seconds)

PULLING = "pulling host"   # the host that pulls the most (ralp/step_cost.py ``elsewhere``)
SERVE_CONV, SERVE_FC = "serve conv parameters", "serve FC parameters"
# A host's flows (ralp/evaluator.py ``Stage.flow``): its serving, its pull and its pushes share its NIC's directions
SERVING, PULLING_FLOW, PUSHING = "serving", "pulling", "pushing"


def colocated_ps_cost(s: Setting) -> StepCost:
    """Sync PS with one PS task beside each worker, on two hosts at once (module docstring), each
    staged as a dedicated PS's worker is (``sync_ps_stages``) on its own bytes, CPU and links.

    Measured: priced as one host with the slowest phase's bytes, the step was predicted 25-29%
    long at 1 Gbit/s until the host's transport CPU and the staging were priced (alexnet_cifar,
    vgg_cifar, 2 and 4 workers, run 20261204T232825Z-fc7d7e); where the links bound the step
    (50-87 Mbit/s) the measured step was then still 1.13-1.32x the prediction (run
    20261205T002747Z-c379c0), while the same transfers alone over gRPC reach 94-95% of line rate.
    The cause: the busiest host pulls little (its shard is local), so its worker computes, and
    then pushes its gradients for the other shards, while the other workers still pull its shard
    through the same outgoing link. The push and the serving are two TCP flows on one link
    direction and share it (two flows: ralp/evaluator.py ``Stage``), so the last parameter reaches
    the pulling host later by what the push sent meanwhile, and that host's whole step with it.
    With k workers per host (and so k PS tasks), a host's load Q is its tasks' shards: each of its
    workers reads all Q floats through loopback, serves 1/k of the (W-k) remote reads of Q and
    receives 1/k of their gradients, all on the host's CPU as the transport's local bytes, never
    as a link."""
    phases, mean_bytes, loads = colocated_phases(s.profile.variable_sizes, s.W, s.comp, s.k)
    busiest = max(range(len(loads)), key=lambda h: loads[h][0])
    others = [h for h in range(len(loads)) if h != busiest]
    if not others:  # one host: every read and gradient stays on it
        chain = _worker(s, loads[busiest][0], 0.0)
        stages = chain + [_sums(s, loads[busiest][1], _pushes(chain))]
        return _step_cost(s, phases, stages, mean_bytes, loads[busiest][1])
    pulling = min(others, key=lambda h: loads[h][0])
    (q_b, task_b), (q_p, task_p) = loads[busiest], loads[pulling]
    here, there = WORKER_RX, on_host(WORKER_RX, PULLING)
    p_conv = (conv_fc_stages(s) or (1.0, 1.0))[0]
    ours_served, theirs_served = _serve(s, q_b, p_conv), elsewhere(_serve(s, q_p, p_conv), PULLING)
    stages = ours_served + theirs_served
    ours = _received_by(_worker(s, q_b, q_p, served=_names(theirs_served)), here, there)
    outside = [st.name for st in ours_served]
    theirs = _received_by(elsewhere(_worker(s, q_p, q_b, served=_names(ours_served)), PULLING, outside), there, here)
    pushed = _pushes(ours) + _pushes(theirs)
    stages += ours + theirs + [_sums(s, task_b, pushed)]
    stages += elsewhere([_sums(s, task_p, pushed)], PULLING, pushed)
    return _step_cost(s, phases, stages, mean_bytes, task_b)


def _serve(s: Setting, q: float, p_conv: float) -> List[Stage]:
    """A host's reads of its load ``q`` by the (W-k) workers of the other hosts, its worker's
    1/k of them, leaving from the step's start on its outgoing link, shared with its pushes: the
    conv parameters' share (``p_conv``) first, then the FC's, as each worker's pull is split
    (``sync_ps_stages``, which its readers' forward passes wait for)."""
    served = 4.0 * (s.W - s.k) * q / s.k
    phase, hops = Phase("pull parameters", worker_tx=served), None if served else 0  # nothing served: no hop
    stages = [s.transfer(phase, share=p_conv, name=SERVE_CONV, hops=hops, flow=SERVING)]
    if p_conv < 1.0:
        stages.append(s.transfer(phase, [SERVE_CONV], 1.0 - p_conv, SERVE_FC, hops, flow=SERVING))
    return stages


def _names(serve: List[Stage]):
    """``served`` for ``sync_ps_stages``: what a reader's conv and FC forward wait for."""
    return [serve[0].name], [serve[-1].name]


def _worker(s: Setting, q: float, peer: float, served=((), ())) -> List[Stage]:
    """A worker on a host of load ``q``: it pulls the rest (4(P - q) bytes in), computes, and pushes
    its gradients of the rest, with the host's transport CPU for what it sends, receives and moves
    through loopback. Its pushes reach the other priced host (load ``peer``) at the same time as
    every other worker's, so they last as long as that host's NIC takes to receive its 1/k of the
    (W-k) gradients of ``peer`` (``_received_by`` puts that on the peer's link)."""
    P, W, k, comp = s.P, s.W, s.k, s.comp
    pull = Phase("pull parameters", worker_rx=4.0 * (P - q))
    push = Phase("push gradients", worker_tx=gradient_bytes(P - q, comp),
                 worker_rx=(W - k) * gradient_bytes(peer, comp) / k)
    transport = (transport_seconds(s, sent=4.0 * (W - k) * q / k, received=4.0 * (P - q), local=4.0 * q),
                 transport_seconds(s, sent=push.worker_tx, received=(W - k) * gradient_bytes(q, comp) / k,
                                   local=gradient_bytes(q, comp)))
    return sync_ps_stages(s, pull, push, s.on_worker(P, comp, 0), None, transport, served=served,
                          flows=(PULLING_FLOW, PUSHING))


def _received_by(chain: List[Stage], mine: str, peers: str) -> List[Stage]:
    """``chain`` with its pushes received on the peer host's link (``peers``) instead of its own (``mine``)."""
    return [replace(st, work={peers if r == mine else r: v for r, v in st.work.items()}) if st.flow == PUSHING else st
            for st in chain]


def _pushes(chain: List[Stage]) -> List[str]:
    """The backward and push stages of a ``_worker`` chain: what the PS's sums wait for."""
    last_pull = next(i for i, st in enumerate(chain) if st.name.endswith("transport of the FC pull"))
    return [st.name for st in chain[last_pull + 1:]]


def _sums(s: Setting, task: float, pushed: List[str]) -> Stage:
    """The largest PS task of a host sums its shard's W gradients and updates it, on the host's CPU."""
    return s.compute("PS sums and update", _ps_work(s, task), pushed, on_ps=True, phase="ps compute")


def _ps_work(s: Setting, task: float) -> float:
    return s.ps_passes(task, s.W + UPDATE_PASSES) + s.on_ps(task * s.W, s.comp, 1)


def _step_cost(s: Setting, phases, stages, mean_bytes, task: float) -> StepCost:
    return StepCost(phases, stages, s.train_full / 3, s.train_full * 2 / 3, s.ps_passes(task, s.W + UPDATE_PASSES),
                    s.on_worker(s.P, s.comp, 0), s.on_ps(task * s.W, s.comp, 1), mean_bytes=mean_bytes)


def colocated_phases(sizes, W, comp, k=1):
    """Pull and push phases of sync PS with one PS task beside each of W workers, k per host.

    PS task i sits beside worker i, on host i // k (ranks fill hosts in order), so host h
    holds Q_h, its tasks' shards: its k workers pull the other shards (k x 4(P - Q_h)) while
    it serves Q_h to the W-k workers of other hosts (4(W-k)Q_h), then they push the other
    shards' gradients while it receives W-k gradients of Q_h. The phases carry each direction's
    largest host, per worker (1/k of the host's): the bytes the report compares per host.
    Returns (phases, mean (tx, rx) per worker, each host's (Q_h, largest task's shard))."""
    shards = shard_loads(sizes, W)
    hosts = [sum(shards[h * k:(h + 1) * k]) for h in range(W // k)]
    P = float(sum(shards))
    pull = [(4.0 * (W - k) * q, k * 4.0 * (P - q)) for q in hosts]
    push = [(k * gradient_bytes(P - q, comp), (W - k) * gradient_bytes(q, comp)) for q in hosts]
    phases = [Phase("pull parameters", worker_tx=max(t for t, _ in pull) / k, worker_rx=max(r for _, r in pull) / k),
              Phase("push gradients", worker_tx=max(t for t, _ in push) / k, worker_rx=max(r for _, r in push) / k)]
    mean_tx = sum(a[0] + b[0] for a, b in zip(pull, push)) / len(hosts) / k
    mean_rx = sum(a[1] + b[1] for a, b in zip(pull, push)) / len(hosts) / k
    loads = [(q, max(shards[h * k:(h + 1) * k])) for h, q in enumerate(hosts)]
    return phases, (mean_tx, mean_rx), loads
