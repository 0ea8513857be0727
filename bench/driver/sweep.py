"""Sweep definitions: a TOML file naming a grid of configurations to run.

    name = "headline"
    repeats = 3                # every point 3 times, interleaved (--repeats overrides)
    max_steal = 0.10           # a point measured while the hypervisor took more of this VM's CPU
                               # is measured again (--max-steal overrides; bench/launch/cpu_steal.py)
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

A path that names no file falls back to the sweep files shipped with the code (``shipped_root``), so
``ralp-bench sweep sweeps/headline.toml`` works from any directory of an installed copy; a model file
such a sweep names (``examples/custom_cnn.py:build``) is then read from the shipped copy too.
"""
import dataclasses
import hashlib
import itertools
import json
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import bench
from bench.core.config import RunConfig, check_repeats, smoke
from bench.core.errors import UserError
from bench.launch.cpu_steal import check_max_steal
from bench.models.sources import SAVED_SUFFIXES

CLUSTER_KEYS = ("cluster", "bandwidth", "ps_bandwidth", "latency", "scale_to", "hostfile", "cpus_per_host")
RUN_KEYS = {f.name for f in dataclasses.fields(RunConfig)} - {"out", "dump_weights", "extra", "calibrate_on"}


@dataclass
class SweepPoint:
    config: RunConfig
    cluster: Dict = field(default_factory=dict)

    def cluster_key(self):
        c = self.config
        return (c.workers, c.ps) + tuple(sorted((k, str(v)) for k, v in self.cluster.items()))

    def digest(self) -> str:
        """This point as the sweep file asked for it: every setting and cluster key, hashed. A
        journaled row carries it (``sweep_point``), so a resumed sweep skips exactly the points it
        measured. Why not the row's own columns: a row records a setting's resolved value (an auto
        bucket size as the plan chose it) and not every knob a grid may vary (Horovod's fusion
        buffer), so two points differing only there looked like one. Taken before the cluster
        settles the configuration: a link rate measured on real hosts may differ between runs."""
        asked = {"config": dataclasses.asdict(self.config), "cluster": self.cluster}
        return hashlib.sha256(json.dumps(asked, sort_keys=True, default=str).encode()).hexdigest()[:16]


@dataclass
class Sweep:
    name: str
    description: str
    points: List[SweepPoint]
    repeats: int = 1
    max_steal: Optional[float] = None
    shipped_copy: Optional[Path] = None  # the shipped file read because the path asked for names none


def shipped_root() -> Path:
    """The tree holding the sweep files and examples the README names, laid out as the repository
    root is (``sweeps/``, ``examples/``): ``bench/shipped`` in an installed wheel (pyproject.toml maps
    them there), the checkout itself when running from source or an editable install."""
    package = Path(bench.__file__).resolve().parent
    shipped = package / "shipped"
    return shipped if shipped.is_dir() else package.parent


def shipped_sweeps() -> List[str]:
    """The shipped sweep files, as the README spells them (``sweeps/NAME.toml``)."""
    return sorted(f"sweeps/{p.name}" for p in (shipped_root() / "sweeps").glob("*.toml"))


def find_sweep(path) -> Tuple[Path, Optional[Path]]:
    """(the file ``path`` names, the root its relative model files are read from: None for where
    ralp-bench runs). A relative path that names no file here is looked up in ``shipped_root``."""
    p = Path(path)
    if p.is_file():
        return p, None
    shipped = shipped_root() / p
    if not p.is_absolute() and shipped.is_file():
        return shipped, shipped_root()
    raise UserError(f"sweep file {str(path)!r} not found (from {os.getcwd()}); shipped ones: "
                    f"{', '.join(shipped_sweeps()) or 'none'}")


def model_under(spelling, root: Optional[Path]):
    """``spelling`` with a relative model file (``file.py:function``, ``.keras``/``.h5``) made
    absolute under ``root``; zoo names, ``keras:NAME``, modules and absolute paths unchanged."""
    if root is None or not isinstance(spelling, str):
        return spelling
    target, sep, function = spelling.rpartition(":")
    if sep and target.endswith(".py") and not os.path.isabs(target):
        return f"{root / target}:{function}"
    if spelling.lower().endswith(SAVED_SUFFIXES) and not os.path.isabs(spelling):
        return str(root / spelling)
    return spelling


def load_sweep(path: str, overrides: Dict = None, repeats=None, max_steal=None) -> Sweep:
    p, model_root = find_sweep(path)
    try:
        spec = tomllib.loads(p.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{path}: not valid TOML ({exc})") from None
    defaults = dict(spec.get("defaults", {}))
    defaults.update({k: v for k, v in (overrides or {}).items() if v is not None})
    grids = spec.get("grid") or [{}]
    points = []
    seen = set()  # under RALP_SMOKE: (strategy, PS layout) already taken
    for number, grid in enumerate(grids, 1):
        taken = len(points)
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
            if "model" in settings:
                settings["model"] = model_under(settings["model"], model_root)
            run_settings = {k: v for k, v in settings.items() if k in RUN_KEYS}
            cluster = {k: v for k, v in settings.items() if k in CLUSTER_KEYS}
            try:
                cfg = RunConfig(**run_settings).validate()
            except TypeError as exc:
                raise UserError(f"{path}: grid {number}: {exc}") from None
            if smoke() and (cfg.strategy, cfg.ps_placement) in seen and len(points) > taken:
                continue  # the README test's override: each strategy's first point, and each grid's first
            seen.add((cfg.strategy, cfg.ps_placement))
            points.append(SweepPoint(cfg, cluster))
    if not points:
        raise UserError(f"{path}: the grid is empty")
    try:
        limit = check_max_steal(max_steal if max_steal is not None else spec.get("max_steal"))
    except UserError as exc:
        raise UserError(f"{path}: {exc}") from None
    return Sweep(spec.get("name", p.stem), spec.get("description", ""), points,
                 check_repeats(repeats if repeats is not None else spec.get("repeats")), limit,
                 p if model_root else None)
