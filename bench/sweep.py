"""Sweep definitions: a TOML file naming a grid of configurations to run.

    name = "headline"
    repeats = 3                # every point 3 times, interleaved (--repeats overrides)
    max_steal = 0.10           # a point measured while the hypervisor took more of this VM's CPU
                               # is measured again (--max-steal overrides; see check_max_steal)
    [defaults]                 # any RunConfig field, plus cluster settings
    dataset = "synthetic"
    steps = 5
    [[grid]]                   # cartesian product of the listed values
    model = ["alexnet_cifar", "resnet_cifar"]
    strategy = ["ps", "horovod", "ralp", "auto"]
    workers = [2, 4]
    bandwidth = ["1gbit"]      # cluster keys may vary too: bandwidth, scale_to, ps_bandwidth, latency

Configurations that share a cluster (workers, ps, link settings) run on one
emulated cluster, brought up once. Everything is validated before anything runs.
"""
import dataclasses
import itertools
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List

from typing import Optional

from bench.config import RunConfig, check_repeats
from bench.errors import UserError

CLUSTER_KEYS = ("cluster", "bandwidth", "ps_bandwidth", "latency", "scale_to", "hostfile", "cpus_per_host")
RUN_KEYS = {f.name for f in dataclasses.fields(RunConfig)} - {"out", "dump_weights", "extra"}


@dataclass
class SweepPoint:
    config: RunConfig
    cluster: Dict = field(default_factory=dict)

    def cluster_key(self):
        c = self.config
        return (c.workers, c.ps) + tuple(sorted((k, str(v)) for k, v in self.cluster.items()))


@dataclass
class Sweep:
    name: str
    description: str
    points: List[SweepPoint]
    repeats: int = 1
    max_steal: Optional[float] = None


# A point is measured at most this many times while its rows exceed max_steal; the last one is
# kept as it is (the report flags its steal), so a sweep on a busy host still ends.
STEAL_TRIES = 3


def check_max_steal(value) -> Optional[float]:
    """max_steal: a share of the machine's CPU in (0, 1), or None (no limit).

    Why a sweep needs it: on a virtual machine the hypervisor can take CPU from every emulated
    host at once (the "steal" column of vmstat), which no cgroup quota inside the VM keeps out.
    Over the stored runs of 2026-12-03, the cost model's step time was within +-20% for 76 of 82
    rows measured under 10% steal and for 9 of 25 measured under 20-38% (median measured /
    predicted 1.02-1.05 below 20%, 1.22 at 20-30%, 1.44 above): the model describes the emulated
    cluster, the steal is a neighbour's load. Such a row is kept with status "noisy" (it never
    enters a median) and the point is measured again, up to STEAL_TRIES times."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1:
        raise UserError(f"max_steal must be a share of the CPU between 0 and 1 (e.g. 0.1), got {value!r}")
    return float(value)


def load_sweep(path: str, overrides: Dict = None, repeats=None, max_steal=None) -> Sweep:
    p = Path(path)
    if not p.is_file():
        raise UserError(f"sweep file {path!r} not found; see sweeps/ for examples")
    try:
        spec = tomllib.loads(p.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{path}: not valid TOML ({exc})") from None
    defaults = dict(spec.get("defaults", {}))
    defaults.update({k: v for k, v in (overrides or {}).items() if v is not None})
    grids = spec.get("grid") or [{}]
    points = []
    for number, grid in enumerate(grids, 1):
        keys = list(grid)
        for key in keys + list(defaults):
            if key not in RUN_KEYS and key not in CLUSTER_KEYS:
                raise UserError(f"{path}: grid {number}: unknown key {key!r}; valid: "
                                f"{', '.join(sorted(RUN_KEYS | set(CLUSTER_KEYS)))}")
        values = [v if isinstance(v, list) else [v] for v in grid.values()]
        for combo in itertools.product(*values):
            settings = {**defaults, **dict(zip(keys, combo))}
            if overrides:  # command-line flags beat the file
                settings.update({k: v for k, v in overrides.items() if v is not None})
            run_settings = {k: v for k, v in settings.items() if k in RUN_KEYS}
            cluster = {k: v for k, v in settings.items() if k in CLUSTER_KEYS}
            try:
                cfg = RunConfig(**run_settings).validate()
            except TypeError as exc:
                raise UserError(f"{path}: grid {number}: {exc}") from None
            points.append(SweepPoint(cfg, cluster))
    if not points:
        raise UserError(f"{path}: the grid is empty")
    try:
        limit = check_max_steal(max_steal if max_steal is not None else spec.get("max_steal"))
    except UserError as exc:
        raise UserError(f"{path}: {exc}") from None
    return Sweep(spec.get("name", p.stem), spec.get("description", ""), points,
                 check_repeats(repeats if repeats is not None else spec.get("repeats")), limit)
