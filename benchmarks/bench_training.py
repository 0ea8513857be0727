"""Distributed training benchmarks: measured images/sec, bytes per step, RALP's speedup.

Why one shared setup_cache: a configuration costs tens of seconds of real
mpirun + TensorFlow start-up, and images/sec, bytes and the speedup all come
from the same run. So ``TrainingRuns.setup_cache`` runs every configuration of
the active profile ONCE through ``bench.driver.harness.run_one`` and keeps the result
rows; every ``track_*`` below only reads a row.

No fake numbers: a configuration whose run failed makes its track_ benchmarks
FAIL in asv (the row's failure text goes to stderr, the value is missing, and
``asv run`` exits non-zero), because a crash is a regression a reviewer must
see. A figure that this cluster cannot measure (bytes on a local, loopback
cluster) is skipped: asv records NaN and shows n/a.

Why step times beside images/sec and the speedup: asv 0.6 counts every larger
value as worse (it has no "greater is better"), so ``asv continuous`` and the
published Regressions page flag a throughput DROP only through a figure that
grows when things get slower: the median step time, and RALP's step time over
sync PS's. images/sec and the speedup stay for reading (a "+" there is a gain).
"""
import sys

from .common import ASV_CLUSTER_NAME, AsvSettings, active_profile, cluster_label, project_module, training_configs

PROFILE = active_profile()
TRAINING = PROFILE["training"]
CLUSTER = cluster_label(PROFILE)


def setup_cache_timeout(profile) -> float:
    """Longer than the harness's own deadlines added up, so a hung run ends as a failed
    row (with its reason, cluster torn down) before asv would kill setup_cache."""
    deadline_for = project_module("bench.driver.harness", "bench.harness").deadline_for
    return 120.0 + sum(deadline_for(cfg) for cfg in training_configs(profile))


def _skip(reason: str):
    from asv_runner.benchmarks.mark import SkipNotImplemented

    print(f"benchmarks: skipped: {reason}", file=sys.stderr)
    raise SkipNotImplemented(reason)


def run_profile(profile, cluster: str):
    """{(model, strategy, workers): row} for every configuration, each launched once."""
    run_one = project_module("bench.driver.harness", "bench.harness").run_one
    by_workers = {}
    for cfg in training_configs(profile):
        by_workers.setdefault(cfg.workers, []).append(cfg)
    rows = {}
    for workers, configs in by_workers.items():
        with _launcher(profile, cluster, workers) as launcher:
            for cfg in configs:
                row = run_one(cfg, launcher)
                print(f"benchmarks: {cfg.model} {cfg.strategy} x{workers} on {cluster}: {row['status']} "
                      f"{row.get('images_per_sec')} images/s {row.get('failure') or ''}", file=sys.stderr)
                rows[(cfg.model, cfg.strategy, workers)] = row
    return rows


class _NoCluster:
    def __init__(self, launcher):
        self.launcher = launcher

    def __enter__(self):
        return self.launcher

    def __exit__(self, *exc):
        return False


def _launcher(profile, cluster: str, workers: int):
    if cluster == "local":
        from bench.launch.local import LocalLauncher

        return _NoCluster(LocalLauncher())
    from bench.launch.emulated_launcher import EmulatedLauncher
    from ralp.hardware import parse_bandwidth

    return EmulatedLauncher(workers, 1, parse_bandwidth(profile.get("bandwidth", "1gbit")), name=ASV_CLUSTER_NAME)


class TrainingRuns(AsvSettings):
    """Shared setup: the profile's configurations, run once; ``self.row`` is this parameter set's row."""

    def setup_cache(self):
        return run_profile(PROFILE, CLUSTER)

    setup_cache.timeout = setup_cache_timeout(PROFILE)

    def ok_row(self, rows, model, strategy, workers):
        row = rows[(model, strategy, workers)]
        if row["status"] != "ok":
            raise RuntimeError(f"{model} {strategy} x{workers} failed: {row['failure']}")
        return row

    def step_time(self, rows, model, strategy, workers):
        value = self.ok_row(rows, model, strategy, workers).get("step_time_median_s")
        if value is None:
            raise RuntimeError(f"{model} {strategy} x{workers}: the run timed no steps")
        return value


class MeasuredTraining(TrainingRuns):
    """Per configuration: throughput and the busiest link's bytes per step."""
    params = (TRAINING["models"], TRAINING["strategies"], TRAINING["workers"], [CLUSTER])
    param_names = ["model", "strategy", "workers", "cluster"]

    def track_images_per_sec(self, rows, model, strategy, workers, cluster):
        value = self.ok_row(rows, model, strategy, workers)["images_per_sec"]
        if value is None:
            raise RuntimeError(f"{model} {strategy} x{workers}: the run timed no steps")
        return value

    track_images_per_sec.unit = "images/s"

    def track_step_time(self, rows, model, strategy, workers, cluster):
        """Median timed step (seconds): lower is better, so asv flags a slowdown."""
        return self.step_time(rows, model, strategy, workers)

    track_step_time.unit = "seconds"

    def track_bytes_per_step(self, rows, model, strategy, workers, cluster):
        """Bytes (sent + received) per step on the PS host's link; a worker's link for
        Horovod (no PS). ``auto`` is judged by the plan it chose."""
        row = self.ok_row(rows, model, strategy, workers)
        on_ps = row["plan"] != "horovod"
        value = row["bytes_ps_measured"] if on_ps else row["bytes_worker_measured"]
        if value is None:
            _skip(f"no per-host byte counters on a {cluster} cluster")
        return value

    track_bytes_per_step.unit = "bytes"


STRATEGIES_COMPARED = ("ps", "ralp")


class RalpSpeedup(TrainingRuns):
    """Measured images/sec of RALP over sync PS on the same model, workers and cluster."""
    params = (TRAINING["models"], TRAINING["workers"], [CLUSTER])
    param_names = ["model", "workers", "cluster"]
    unit = "speedup (x)"

    def setup(self, rows, model, workers, cluster):
        if not set(STRATEGIES_COMPARED) <= set(TRAINING["strategies"]):
            raise NotImplementedError(f"profile {PROFILE['name']!r} does not run both ps and ralp")

    def track_speedup_ralp_over_ps(self, rows, model, workers, cluster):
        ps, ralp = (self.ok_row(rows, model, s, workers)["images_per_sec"] for s in STRATEGIES_COMPARED)
        return ralp / ps

    def track_ralp_step_time_over_ps(self, rows, model, workers, cluster):
        """RALP's median step time over sync PS's (1/speedup): lower is better for asv."""
        ps, ralp = (self.step_time(rows, model, s, workers) for s in STRATEGIES_COMPARED)
        return ralp / ps

    track_ralp_step_time_over_ps.unit = "ratio"
