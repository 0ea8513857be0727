"""How close each traffic pattern gets to the line rate of an emulated cluster's links.

Why: a link that gives one transport all of its rate and another half of it
measures the transports, not the strategies. Each pattern a strategy relies
on is measured as a share of what the shaped links allow:
- ``one flow``: one host sends to another (TCP, one connection);
- ``both ways``: two hosts send to each other at once (full duplex);
- ``fan-in``: every other host sends to host 0 at once (workers pushing to the PS);
- ``all-to-all``: every worker host sends to every other at once (sync PS with a PS task
  beside each worker: each worker pushes a shard to every other host's PS task);
- ``all-reduce``: Horovod's own all-reduce of a model-sized buffer over the
  worker hosts (mpirun, as runs launch it; or inside the first Horovod run's ranks,
  ``LinkChecks``); line time 2(N-1)/N * bytes / rate.

The raw-TCP patterns run ``python -m bench.rank.link_probe serve|send``
inside the hosts' namespaces and CPU groups; the receiver times first byte
to last byte. Efficiency = line-rate time / measured time (1.0 = line rate
after Ethernet/IP/TCP framing, which is why ``GOODPUT`` scales the rate).
"""
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional

from bench.launch import processes
from bench.launch.base import BASE_ENV
from bench.launch.cpu_steal import PROBE_MAX_STEAL, measure_quietly, too_stolen

GOODPUT = 1448 / 1514   # TCP payload per Ethernet frame (MTU 1500, timestamps on)
PORT = 47_011


@dataclass
class PatternResult:
    pattern: str
    hosts: int
    rate_bps: float
    seconds: float
    line_seconds: float
    steal: Optional[float] = None  # the machine's CPU steal while it ran (bench/launch/cpu_steal.py)

    @property
    def efficiency(self) -> float:
        return self.line_seconds / self.seconds if self.seconds > 0 else 0.0


# ---- driving the patterns from outside ------------------------------------------------

def _probe_argv(*args):
    return [sys.executable, "-m", "bench.rank.link_probe", *map(str, args)]


def _raw_pattern(cluster, name, pairs, total_bytes) -> PatternResult:
    """``pairs``: [(sender index, receiver index)]; one receiver process per receiving host."""
    seconds = _timed_transfer(cluster, pairs, total_bytes)
    receivers = sorted({r for _, r in pairs})
    # The busiest receiver's link limits: it takes in n * total at its rate.
    line = max(sum(1 for _, rr in pairs if rr == r) * total_bytes * 8 / (cluster.hosts[r].bandwidth_bps * GOODPUT)
               for r in receivers)
    rate = min(cluster.hosts[r].bandwidth_bps for r in receivers)
    return PatternResult(name, len({h for p in pairs for h in p}), rate, seconds, line)


def _timed_transfer(cluster, pairs, total_bytes) -> float:
    """Seconds from the first byte to the last at the slowest receiver, every sender of ``pairs``
    sending ``total_bytes`` at once."""
    receivers = sorted({r for _, r in pairs})
    servers, senders = {}, []
    try:
        for r in receivers:
            n = sum(1 for _, rr in pairs if rr == r)
            servers[r] = processes.popen(cluster.exec_argv(r, _probe_argv("serve", PORT, n, total_bytes)),
                                         stdout=subprocess.PIPE, text=True)
            first = servers[r].stdout.readline().strip()
            if first != "ready":
                raise RuntimeError(f"the link probe did not start on host {r}: {first or 'no output'}")
        senders = [processes.popen(cluster.exec_argv(s, _probe_argv("send", cluster.hosts[r].ip, PORT, total_bytes)))
                   for s, r in pairs]
        for p in senders:
            p.wait(timeout=600)
        seconds = max(json.loads(servers[r].communicate(timeout=60)[0].splitlines()[-1])["seconds"]
                      for r in receivers)
    finally:  # on hosts, each program is an mpirun with its ssh clients: stop the whole session
        for p in [*servers.values(), *senders]:
            if p.poll() is None:
                processes.stop(lambda: processes.session_members(p.pid), grace_s=0.5)
                p.wait()
    return seconds


FIRST_PROBE_BYTES = 64 * 2 ** 20  # half a second at 1 Gbit/s


def measure_line_rate(cluster, sender: int, receiver: int, seconds: float = 1.0) -> float:
    """The line rate (bit/s) from host ``sender`` to host ``receiver``, where nobody stated it
    (hosts and Slurm without --bandwidth): one TCP flow's goodput over GOODPUT, the framing the
    patterns above allow for. A first 64 MiB; where that took under half of ``seconds`` (links
    faster than ~1 Gbit/s), a second transfer sized from it to last about ``seconds``, so the
    figure is one flow's steady rate on a 1 Gbit/s link or a 100 Gbit/s one alike; the faster
    of the two (a slow TCP start only lowers a figure). Each transfer starts two programs
    through mpirun, seconds apiece over ssh, hence one transfer where one is enough. Measured
    again while the hypervisor steals CPU, as every pattern is."""
    def measure():
        took = _timed_transfer(cluster, [(sender, receiver)], FIRST_PROBE_BYTES)
        rate = FIRST_PROBE_BYTES * 8 / took / GOODPUT
        if took < 0.5 * seconds:
            size = int(rate / 8 * GOODPUT * seconds)
            rate = max(rate, size * 8 / _timed_transfer(cluster, [(sender, receiver)], size) / GOODPUT)
        return rate

    return measure_quietly(measure, PROBE_MAX_STEAL)[0]


def _allreduce_pattern(cluster, hosts: List[int], floats: int, repeats: int, env=None,
                       ops: str = "gloo") -> PatternResult:
    slots = [1 if i in hosts else 0 for i in range(len(cluster.hosts))]
    argv = (cluster.mpirun_prefix() + ["mpirun"] + cluster.mpirun_args(slots)
            + [a for name in sorted(BASE_ENV) for a in ("-x", name)]
            + _probe_argv("allreduce", floats, repeats, ops, cluster.subnet))

    out = processes.run(argv, timeout=900, env={**os.environ, **BASE_ENV, **(env or {})})
    if out.returncode != 0:
        raise RuntimeError(f"all-reduce probe failed: {out.stdout[-1500:]}{out.stderr[-1500:]}")
    seconds = json.loads([line for line in out.stdout.splitlines() if line.startswith("{")][-1])["seconds"]
    return _allreduce_result(cluster, hosts, floats, seconds)


def _allreduce_result(cluster, hosts: List[int], floats: int, seconds: float) -> PatternResult:
    """An all-reduce of ``floats`` fp32 values over ``hosts`` that took ``seconds``, against its
    line time 2(N-1)/N * bytes / rate."""
    n = len(hosts)
    rate = min(cluster.hosts[h].bandwidth_bps for h in hosts)
    line = 2 * (n - 1) / n * 4 * floats * 8 / (rate * GOODPUT)
    return PatternResult("all-reduce", n, rate, seconds, line)


ALLREDUCE_MAX_BYTES = 256 * 2 ** 20


def _allreduce_floats(cluster, hosts: List[int], seconds: float) -> int:
    """A buffer the ring moves in about ``seconds`` at line rate over ``hosts``, at most
    ALLREDUCE_MAX_BYTES: the buffer sits in memory on every rank (inside a Horovod run, beside
    the model, on its GPU where it has one), and a second's worth of 100 Gbit/s would be 12 GB.
    At that cap the ring still takes ~0.1 s on 25 GbE, far above Horovod's per-call overhead."""
    n = len(hosts)
    total = min(cluster.hosts[h].bandwidth_bps for h in hosts) / 8 * GOODPUT * seconds
    return max(1, min(int(total / 4 * n / (2 * max(1, n - 1))), ALLREDUCE_MAX_BYTES // 4))


def _worker_hosts(hosts: int) -> List[int]:
    """The hosts a pattern's workers sit on: all but the PS host 0, or both hosts of a pair."""
    return list(range(1, hosts)) if hosts >= 3 else list(range(hosts))


# Which pattern a strategy's traffic follows is its spec's (bench/core/strategy_specs.py).
PATTERNS = ("one flow", "both ways", "fan-in", "all-to-all", "all-reduce")
ALLREDUCE_FLOATS = 3_515_402  # alexnet_cifar's parameters: a model-sized buffer


def measure_pattern(cluster, pattern: str, seconds: float = 1.0, floats: Optional[int] = None,
                    repeats: int = 3, ops: str = "gloo", max_steal: Optional[float] = PROBE_MAX_STEAL) -> PatternResult:
    """One pattern on an up cluster: ~``seconds`` of traffic at line rate (the all-reduce: a
    buffer of ``floats``, default sized like the raw patterns). Host 0 is the PS host, the
    others are worker hosts; a cluster of 2 hosts uses both for every pattern. Measured again
    (up to 3 times) while the hypervisor takes more than ``max_steal`` of the machine's CPU:
    moving bytes through veth, bridge and htb costs the hosts CPU, and theft cut a 1 Gbit/s
    flow to 78% of line rate (results/headline.md)."""
    result, steal = measure_quietly(lambda: _pattern(cluster, pattern, seconds, floats, repeats, ops), max_steal)
    result.steal = steal
    return result


def _pattern(cluster, pattern, seconds, floats, repeats, ops) -> PatternResult:
    hosts = len(cluster.hosts)
    workers = _worker_hosts(hosts)
    rate = min(cluster.hosts[h].bandwidth_bps for h in workers)
    total = int(rate / 8 * GOODPUT * seconds)
    if pattern == "one flow":
        return _raw_pattern(cluster, pattern, [(workers[-1], 0 if hosts >= 2 else workers[0])], total)
    if pattern == "both ways":
        a, b = workers[0], workers[1] if len(workers) > 1 else 0
        return _raw_pattern(cluster, pattern, [(a, b), (b, a)], total)
    if pattern == "fan-in":
        senders = [h for h in range(1, hosts)]
        return _raw_pattern(cluster, pattern, [(s, 0) for s in senders], max(1, total // len(senders)))
    if pattern == "all-to-all":
        pairs = [(a, b) for a in workers for b in workers if a != b]
        return _raw_pattern(cluster, pattern, pairs, max(1, total // max(1, len(workers) - 1)))
    if pattern == "all-reduce":
        return _allreduce_pattern(cluster, workers, floats or _allreduce_floats(cluster, workers, seconds), repeats,
                                  ops=ops)
    raise ValueError(f"unknown pattern {pattern!r}; one of {', '.join(PATTERNS)}")


def measure(cluster, seconds: float = 1.0, patterns=PATTERNS, **kwargs) -> List[PatternResult]:
    """``measure_pattern`` for each of ``patterns`` (the all-reduce only with >= 2 worker hosts)."""
    return [measure_pattern(cluster, p, seconds, **kwargs) for p in patterns]


class LinkChecks:
    """A launcher's link check: the efficiency of each traffic pattern its runs rely on, measured
    once per cluster and written into each row (``fields``). The all-reduce is measured inside
    the first Horovod run that can carry it (``in_run_floats``): its ranks are up with Horovod
    started, on the hosts this probe would use, so the check needs no mpirun of its own. Where
    the run cannot carry it (another transport, several ranks per host, other hosts) or the
    hypervisor stole more than PROBE_MAX_STEAL while it ran, the pattern is measured apart, as
    every other pattern is."""

    def __init__(self, probed: Callable[[], object]):
        self._probed = probed  # the cluster as the probes drive it (an EmulatedCluster, ProbedHosts)
        self._efficiency: Dict[str, float] = {}

    def in_run_floats(self, pattern: Optional[str], ranks_per_host: List[int]) -> Optional[int]:
        """fp32 values for a run placing ``ranks_per_host`` to all-reduce before training, where
        that run makes the still-missing all-reduce check; None: nothing for the run to do."""
        if pattern != "all-reduce" or pattern in self._efficiency or max(ranks_per_host, default=0) != 1:
            return None
        cluster = self._probed()
        hosts = [h for h, n in enumerate(ranks_per_host) if n]
        if hosts != _worker_hosts(len(cluster.hosts)) or len(hosts) < 2:
            return None
        return _allreduce_floats(cluster, hosts, 1.0)

    def fields(self, pattern: Optional[str], in_run: Optional[Dict[str, float]] = None) -> Dict:
        """The row's link_pattern and link_efficiency; ``in_run``: the run's own all-reduce
        measurement (bench/rank/main.py ``_link_probe``), read instead of measuring apart."""
        if pattern is None:
            return {}
        if pattern not in self._efficiency:
            cluster = self._probed()
            if pattern == "all-reduce" and in_run and not too_stolen(in_run["steal"], PROBE_MAX_STEAL):
                result = _allreduce_result(cluster, _worker_hosts(len(cluster.hosts)), int(in_run["floats"]),
                                           in_run["seconds"])
            else:
                result = measure_pattern(cluster, pattern)
            self._efficiency[pattern] = result.efficiency
        return {"link_pattern": pattern, "link_efficiency": self._efficiency[pattern]}
