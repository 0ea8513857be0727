"""CPU steal: the share of this virtual machine's CPU its hypervisor gave to other guests;
and other processes' load: the cores the rest of the machine kept busy beside a measurement.

Why it has a module: no cgroup quota inside a VM keeps a neighbour's load out of a
measurement; the hypervisor takes CPU from every emulated host at once. Over the runs
stored on 2026-12-03 the cost model's step time was within +-20% for 76 of 82 rows
measured under 10% steal and for 9 of 25 measured under 20-38% (median measured /
predicted 1.02-1.05 below 20%, 1.22 at 20-30%, 1.44 above); the link probes lost most
of their line rate under the same theft (results/headline.md). So every measurement
records its steal (rows: ``cpu_steal``), and sweeps and link probes may measure again
while it exceeds a limit (``measure_quietly``). One rule, read by the sweep
(bench/commands/sweep.py), the link probes (bench/launch/link_probe.py), asv and the
calibration every prediction is built on (bench/driver/calibration.py).

The second thief is the user's own work (a build, another run): no quota stops it from taking
the cores a calibration's quota promises, and the figures it leaves are cached for good
(``OthersLoad``; bench/driver/calibration.py measures again while it crowds the quota).
"""
import os
import resource
import time
from typing import Callable, Optional, Tuple, TypeVar

from bench.core.errors import UserError

# At most this many measurements while each exceeds the limit; the last one stands whatever
# its steal (a report flags it), so work on a busy host still ends.
STEAL_TRIES = 3
PROBE_MAX_STEAL = 0.10  # the limit of the harness's own probes: links (cluster up, asv) and calibration

T = TypeVar("T")


def cpu_times():
    """(steal, total) jiffies of this machine (/proc/stat), or None off Linux."""
    try:
        with open("/proc/stat") as fh:
            fields = [int(v) for v in fh.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    return (fields[7] if len(fields) > 7 else 0), sum(fields[:8])


def steal_share(before, after) -> Optional[float]:
    """Share of this machine's CPU time taken by the hypervisor between two ``cpu_times``."""
    if not before or not after or after[1] <= before[1]:
        return None
    return (after[0] - before[0]) / (after[1] - before[1])


def check_max_steal(value) -> Optional[float]:
    """A steal limit: a share of the CPU in (0, 1), or None (no limit)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1:
        raise UserError(f"max_steal must be a share of the CPU between 0 and 1 (e.g. 0.1), got {value!r}")
    return float(value)


def too_stolen(steal: Optional[float], max_steal: Optional[float]) -> bool:
    return max_steal is not None and steal is not None and steal > max_steal


def measure_quietly(measure: Callable[[], T], max_steal: Optional[float],
                    on_stolen: Callable[[T, float, int], None] = lambda result, steal, attempt: None,
                    steal_of: Optional[Callable[[T], Optional[float]]] = None,
                    crowded: Callable[[T], bool] = lambda result: False) -> Tuple[T, Optional[float]]:
    """``measure()`` and the steal during it, again (up to STEAL_TRIES) while the steal exceeds
    ``max_steal`` or ``crowded(result)`` says other work took what it measured;
    ``on_stolen(result, steal, attempt)`` hears of each superseded result.
    ``steal_of(result)``: the steal the result recorded itself (a run's row times only its
    ranks; None: nothing to judge, e.g. a failed run), else the steal around ``measure()``."""
    for attempt in range(1, STEAL_TRIES + 1):
        before = cpu_times()
        result = measure()
        steal = steal_of(result) if steal_of else steal_share(before, cpu_times())
        if attempt == STEAL_TRIES or not (too_stolen(steal, max_steal) or crowded(result)):
            return result, steal
        on_stolen(result, steal, attempt)
    raise AssertionError("unreachable")


def busy_seconds() -> Optional[float]:
    """CPU seconds this machine's cores have spent busy since boot (/proc/stat: user, nice,
    system, irq, softirq; steal is the hypervisor's, counted apart), or None off Linux."""
    try:
        with open("/proc/stat") as fh:
            fields = [int(v) for v in fh.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    return sum(fields[i] for i in (0, 1, 2, 5, 6) if i < len(fields)) / os.sysconf("SC_CLK_TCK")


def own_seconds() -> float:
    """CPU seconds this process (every thread) has used."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class OthersLoad:
    """``with OthersLoad() as load: work()``; then ``load.cores``: the cores every other process
    of this machine kept busy, on average, while ``work`` ran in this one (None off Linux). The
    machine's busy time less this process's own: what a quota cannot keep away."""

    def __enter__(self):
        self._busy, self._own, self._start = busy_seconds(), own_seconds(), time.monotonic()
        self.cores = None
        return self

    def __exit__(self, *exc):
        busy, wall = busy_seconds(), time.monotonic() - self._start
        if busy is not None and self._busy is not None and wall > 0:
            self.cores = max(0.0, (busy - self._busy) - (own_seconds() - self._own)) / wall
        return False


def free_share(others_cores: Optional[float], quota_cores: float, machine_cores: Optional[int] = None) -> Optional[float]:
    """The share of a ``quota_cores`` quota the rest of the machine left free while it kept
    ``others_cores`` busy (1.0: all of it; None: not measured)."""
    if others_cores is None:
        return None
    left = (machine_cores or os.cpu_count() or 1) - others_cores
    return max(0.0, min(1.0, left / quota_cores))
