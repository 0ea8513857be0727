"""The profile knob and the asv settings every benchmark class shares.

Why one knob: what ``asv run`` costs is decided in one place (profiles.json, or
RALP_ASV_PROFILE=fast|regular|large), as scikit-learn's asv_benchmarks do; the
benchmark classes only read the grid. The knob is read at import time because
asv fixes each benchmark's parameter grid when it discovers the suite.

The cluster is a benchmark parameter (``emulated-1gbit`` or ``local``) so that
asv never draws a loopback number and a shaped-link number on the same line.
"""
import importlib
import json
import os
from pathlib import Path
from typing import Dict, List


def project_module(*names):
    """The first of ``names`` the measured commit's package has. asv imports this suite (the
    working tree's) against every commit it measures, and a module may have moved between them
    (one package per layer: bench.errors -> bench.core.errors, bench.harness ->
    bench.driver.harness, ...). A module that exists but fails to import is an error, not a miss."""
    for name in names:
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if not (exc.name and name.startswith(exc.name)):
                raise
    raise ModuleNotFoundError(f"none of {', '.join(names)}")


UserError = project_module("bench.core.errors", "bench.errors").UserError

PROFILE_FILE = Path(__file__).with_name("profiles.json")
PROFILE_ENV = "RALP_ASV_PROFILE"
ASV_CLUSTER_NAME = "asv"  # netns prefix, distinct from `ralp-bench run`'s "ralp"


def load_profiles(path: Path = PROFILE_FILE) -> Dict:
    with open(path) as f:
        return json.load(f)


def profile_name(path: Path = PROFILE_FILE) -> str:
    """RALP_ASV_PROFILE when set, else "smoke" under RALP_SMOKE (the README test's override,
    bench/core/config.py ``smoke``; read here from the environment, not imported: asv imports this
    suite against every commit it measures, including commits older than that function), else
    the file's "profile" (default fast)."""
    smoke = os.environ.get("RALP_SMOKE", "") not in ("", "0")
    return os.environ.get(PROFILE_ENV) or ("smoke" if smoke else load_profiles(path).get("profile", "fast"))


def active_profile(name: str = None, path: Path = PROFILE_FILE) -> Dict:
    profiles = load_profiles(path)["profiles"]
    name = name or profile_name(path)
    if name not in profiles:
        raise UserError(f"unknown asv profile {name!r} ({PROFILE_ENV} or {path.name}); "
                        f"valid: {', '.join(profiles)}")
    return dict(profiles[name], name=name)


def cluster_label(profile: Dict) -> str:
    """'emulated-<bandwidth>' when this machine can shape links (root + netns), else 'local'."""
    wanted = profile.get("cluster", "auto")
    if wanted not in ("auto", "emulated", "local"):
        raise UserError(f"asv profile {profile['name']!r}: cluster must be auto, emulated or local, got {wanted!r}")
    if wanted == "local":
        return "local"
    from bench.launch.netns import can_emulate

    ok, reason = can_emulate()
    if not ok and wanted == "emulated":
        raise UserError(f"asv profile {profile['name']!r} asks for an emulated cluster: {reason}")
    return f"emulated-{profile.get('bandwidth', '1gbit')}" if ok else "local"


def training_configs(profile: Dict) -> List:
    """Every RunConfig the training benchmarks need, each exactly once."""
    RunConfig = project_module("bench.core.config", "bench.config").RunConfig

    t = profile["training"]
    return [RunConfig(model=m, strategy=s, workers=w, ps=1, batch_size=t["batch_size"], steps=t["steps"],
                      warmup_steps=t["warmup_steps"], dataset="synthetic", bandwidth=profile.get("bandwidth"))
            .validate()
            for w in t["workers"] for m in t["models"] for s in t["strategies"]]


class AsvSettings:
    """asv attributes for benchmarks that train: one sample, one process, long timeout.

    A distributed run costs tens of seconds of TF start-up; repeating it buys
    nothing that a second ``asv run`` would not, so processes = repeat = number = 1.
    """
    timeout = 900
    processes = 1
    repeat = 1
    number = 1
    rounds = 1
    warmup_time = 0


class CheapSettings:
    """asv attributes for the cost-model benchmarks (milliseconds per call): asv's
    own sampling, in one process."""
    timeout = 300
    processes = 1
