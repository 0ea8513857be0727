"""CPU quotas for emulated hosts: one cgroup per host with a hard cap (CFS bandwidth control).

Why: emulated hosts share this machine's cores. Without a cap, a host's speed
depends on how many other hosts compute at the same moment, which differs by
strategy (sync PS: every worker computes at once; RALP: the PS computes while
workers wait), so step times measured the contention, not the cluster. With a
quota of ``cores / hosts`` each host is a small machine of its own: it never
gets more than its share, and its idle time is never lent to another host (a
CFS quota is a ceiling, not a weight), as on real, separate machines.

Both kernel interfaces are handled: cgroup v1 (``cpu.cfs_quota_us`` and
``cpu.cfs_period_us`` under the ``cpu`` hierarchy, what this machine mounts)
and cgroup v2 (``cpu.max`` = "QUOTA PERIOD" where the unified hierarchy
carries the cpu controller). Groups are named ``ralp-bench-<cluster>-<host>``
directly under the hierarchy's root, so stale ones are easy to find.

The period is short (10 ms) so a throttled host stalls for milliseconds, not
the 100 ms of the kernel's default period: a PS that used its share serves
the next request after at most one period, as a loaded real host would.
"""
import math
import os
import re
import time
from dataclasses import dataclass
from typing import Dict, List, Optional

PERIOD_US = 10_000
PREFIX = "ralp-bench-"
V1_ROOT = "/sys/fs/cgroup/cpu"
V2_ROOT = "/sys/fs/cgroup"


class CgroupError(RuntimeError):
    """The kernel refused a cgroup operation; the message names the path."""


def _v2_root() -> Optional[str]:
    """The cgroup2 mount that offers the cpu controller, if any."""
    for root in (V2_ROOT, "/sys/fs/cgroup/unified"):
        try:
            with open(os.path.join(root, "cgroup.controllers")) as fh:
                if "cpu" in fh.read().split():
                    return root
        except OSError:
            continue
    return None


def hierarchy() -> Optional[tuple]:
    """("v1", root) or ("v2", root) for the CPU controller, None when neither is usable."""
    if os.path.isfile(os.path.join(V1_ROOT, "cpu.cfs_quota_us")):
        return "v1", V1_ROOT
    root = _v2_root()
    return ("v2", root) if root else None


def available() -> tuple:
    """(True, "") when quotas can be set here, else (False, reason naming the fix)."""
    if os.name != "posix":
        return False, "no cgroups on this OS"
    found = hierarchy()
    if not found:
        return False, ("no cgroup CPU controller mounted (cgroup v1 'cpu' or v2 'cpu.max'); "
                       "mount one or pass --cpus-per-host 0 to run without quotas")
    if not os.access(found[1], os.W_OK):
        return False, "creating cgroups needs root; run as root or pass --cpus-per-host 0"
    return True, ""


@dataclass(frozen=True)
class CpuGroup:
    """One host's group: its path and the cores it may use (quota / period)."""
    path: str
    cores: float

    @property
    def procs_file(self) -> str:
        return os.path.join(self.path, "cgroup.procs")

    def add(self, pid: int):
        with open(self.procs_file, "w") as fh:
            fh.write(str(pid))

    def stats(self) -> Dict[str, float]:
        """nr_periods, nr_throttled and throttled seconds (v1 ``throttled_time`` is in ns)."""
        return read_cpu_stat(self.path)


def read_cpu_stat(path: str) -> Dict[str, float]:
    out: Dict[str, float] = {}
    try:
        with open(os.path.join(path, "cpu.stat")) as fh:
            for line in fh:
                key, _, value = line.partition(" ")
                out[key] = float(value)
    except OSError:
        return {}
    if "throttled_time" in out:  # v1, nanoseconds
        out["throttled_s"] = out["throttled_time"] / 1e9
    elif "throttled_usec" in out:  # v2
        out["throttled_s"] = out["throttled_usec"] / 1e6
    return out


def group_name(cluster: str, host: str) -> str:
    return f"{PREFIX}{cluster}-{host}"


def create(name: str, cores: float, period_us: int = PERIOD_US) -> CpuGroup:
    """A group capped at ``cores`` CPUs (e.g. 0.4 = 40% of one core, 1.5 = one and a half)."""
    if not cores > 0:
        raise CgroupError(f"a CPU quota must be positive, got {cores!r}")
    kind, root = hierarchy() or (None, None)
    if kind is None:
        raise CgroupError(available()[1])
    path = os.path.join(root, name)
    quota_us = max(1000, int(round(cores * period_us)))
    try:
        os.makedirs(path, exist_ok=True)
        if kind == "v1":
            with open(os.path.join(path, "cpu.cfs_period_us"), "w") as fh:
                fh.write(str(period_us))
            with open(os.path.join(path, "cpu.cfs_quota_us"), "w") as fh:
                fh.write(str(quota_us))
        else:
            _enable_v2_cpu(root)
            with open(os.path.join(path, "cpu.max"), "w") as fh:
                fh.write(f"{quota_us} {period_us}")
    except OSError as exc:
        raise CgroupError(f"cannot set a CPU quota on {path}: {exc}") from exc
    return CpuGroup(path, quota_us / period_us)


def _enable_v2_cpu(root: str):
    control = os.path.join(root, "cgroup.subtree_control")
    with open(control) as fh:
        if "cpu" in fh.read().split():
            return
    with open(control, "w") as fh:
        fh.write("+cpu")


def remove(path: str, grace_s: float = 5.0) -> List[int]:
    """Remove a group; its processes (normally none left) are moved to the root first.

    Returns the pids that were still inside (they keep running, uncapped).
    rmdir of a group whose last task just exited can fail with EBUSY for a
    moment, so it is retried for ``grace_s``.
    """
    if not os.path.isdir(path):
        return []
    left = pids_in(path)
    root = os.path.dirname(path)
    for pid in left:
        try:
            with open(os.path.join(root, "cgroup.procs"), "w") as fh:
                fh.write(str(pid))
        except OSError:
            pass
    deadline = time.monotonic() + grace_s
    while True:
        try:
            os.rmdir(path)
            return left
        except FileNotFoundError:
            return left
        except OSError as exc:
            if time.monotonic() > deadline:
                raise CgroupError(f"cannot remove {path}: {exc}") from exc
            time.sleep(0.05)


def pids_in(path: str) -> List[int]:
    try:
        with open(os.path.join(path, "cgroup.procs")) as fh:
            return [int(tok) for tok in fh.read().split()]
    except OSError:
        return []


def process_cpu_ticks(path: str) -> int:
    """CPU time (utime + stime, all threads, in clock ticks) of the processes now in group ``path``:
    what a capped host's own work and its transport cost, read from outside without touching them
    (tools/host_timeline.py, tools/transport_cpu.py). A process that just ended counts nothing."""
    total = 0
    for pid in pids_in(path):
        try:
            with open(f"/proc/{pid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except (OSError, IndexError):
            pass
    return total


def groups_of(cluster: Optional[str] = None) -> List[str]:
    """Paths of our groups (of one cluster, or all of them)."""
    found = hierarchy()
    if not found:
        return []
    pattern = re.compile(re.escape(PREFIX) + (re.escape(cluster) + r"-" if cluster else r"[a-z0-9]+-"))
    try:
        names = os.listdir(found[1])
    except OSError:
        return []
    return [os.path.join(found[1], n) for n in sorted(names) if pattern.match(n)]


def cluster_of(path: str) -> Optional[str]:
    """'ralp123' for '/sys/fs/cgroup/cpu/ralp-bench-ralp123-h0'."""
    match = re.match(re.escape(PREFIX) + r"([a-z][a-z0-9]*)-[a-z0-9]+$", os.path.basename(path))
    return match.group(1) if match else None


# ---- what a process may use ------------------------------------------------------

def _own_v1_group() -> Optional[str]:
    try:
        with open("/proc/self/cgroup") as fh:
            for line in fh:
                _, controllers, rel = line.rstrip("\n").split(":", 2)
                if "cpu" in controllers.split(","):
                    return os.path.join(V1_ROOT, rel.lstrip("/"))
    except OSError:
        return None
    return None


def _own_v2_group() -> Optional[str]:
    try:
        with open("/proc/self/cgroup") as fh:
            for line in fh:
                if line.startswith("0::"):
                    root = _v2_root()
                    return os.path.join(root, line[3:].strip().lstrip("/")) if root else None
    except OSError:
        return None
    return None


def own_quota_cores() -> Optional[float]:
    """The CPU cap of the calling process's cgroup (walking up to the root), None if uncapped.

    Reads the process's own group, so it is right on emulated hosts, in a
    container with a CPU limit, or under a batch scheduler's cgroup alike.
    """
    best = None
    path = _own_v1_group()
    while path and path.startswith(V1_ROOT):
        try:
            quota = int(open(os.path.join(path, "cpu.cfs_quota_us")).read())
            period = int(open(os.path.join(path, "cpu.cfs_period_us")).read())
            if quota > 0:
                best = min(best or math.inf, quota / period)
        except (OSError, ValueError):
            pass
        if path == V1_ROOT:
            break
        path = os.path.dirname(path)
    path = _own_v2_group()
    root = _v2_root()
    while path and root and path.startswith(root):
        try:
            quota, period = open(os.path.join(path, "cpu.max")).read().split()
            if quota != "max":
                best = min(best or math.inf, int(quota) / int(period))
        except (OSError, ValueError):
            pass
        if path == root:
            break
        path = os.path.dirname(path)
    return best


def usable_cores() -> float:
    """Cores this process may use: the machine's, capped by its cgroup quota."""
    cores = float(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))
    quota = own_quota_cores()
    return min(cores, quota) if quota else cores


def threads_for(cores: float) -> int:
    """Compute threads worth running on ``cores`` CPUs: more threads than a quota allows only
    makes them preempt each other (and the host's network threads) inside the cap."""
    return max(1, math.ceil(cores - 1e-9))
