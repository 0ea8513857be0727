"""Sweep definitions: a TOML file naming a grid of configurations to run.

    name = "headline"
    repeats = 3                # every point 3 times, interleaved (--repeats overrides)
    max_steal = 0.10           # a point measured while the hypervisor took more of this VM's CPU
                               # is measured again (--max-steal overrides; bench/cpu_steal.py)
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
from bench.cpu_steal import check_max_steal
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
