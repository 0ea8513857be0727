"""Cost-model benchmarks: how long the analyzer takes to decide, and what it predicts.

Why: the analyzer runs before every ``ralp``/``auto`` launch, so its decision
time should stay small; and the predicted RALP-over-PS speedup is a number that
only moves when the cost model or a model's profile changes, which is exactly
what a reviewer wants flagged. Both are cheap (milliseconds), so CI runs them.

Profiling a model (building the Keras graph: seconds for VGG-16) happens once,
in ``setup_cache``, shared by both classes; the benchmarks time only ``analyze``.
Hardware is a fixed preset (v100-10gbe) with the link rate as a parameter, never
'local' calibration, so the numbers do not depend on the machine.
"""
from .common import CheapSettings, active_profile, project_module

PROFILE = active_profile()
PLANNING = PROFILE["planning"]
HARDWARE_PRESET = "v100-10gbe"
BATCH_SIZE = 32


class ProfiledModels(CheapSettings):
    """Shared setup: the analyzer's ModelProfile of every planning model, built once."""

    def setup_cache(self):
        model_profile = project_module("bench.driver.planning", "bench.planning").model_profile
        return {name: model_profile(name) for name in PLANNING["models"]}

    setup_cache.timeout = 120 * len(PLANNING["models"])


class TimeAnalyze(ProfiledModels):
    """Wall time of one analyzer decision (every strategy, every candidate cut)."""
    params = (PLANNING["models"], PLANNING["workers"])
    param_names = ["model", "workers"]

    def setup(self, profiles, model, workers):
        from ralp.analyzer import analyze  # imported here so the first timed call pays no import
        from ralp.hardware import load_hardware

        self.analyze = analyze
        self.hardware = load_hardware(HARDWARE_PRESET, bandwidth="10gbit")

    def time_analyze(self, profiles, model, workers):
        self.analyze(profiles[model], batch_size=BATCH_SIZE, workers=workers, ps=1, hardware=self.hardware)


class PredictedSpeedup(ProfiledModels):
    """The cost model's sync-PS step time over its best FC-on-PS step time."""
    params = (PLANNING["models"], PLANNING["workers"], PLANNING["bandwidths"])
    param_names = ["model", "workers", "bandwidth"]
    unit = "speedup (x)"

    def track_predicted_speedup(self, profiles, model, workers, bandwidth):
        from ralp.analyzer import analyze
        from ralp.hardware import load_hardware

        plan = analyze(profiles[model], batch_size=BATCH_SIZE, workers=workers, ps=1,
                       hardware=load_hardware(HARDWARE_PRESET, bandwidth=bandwidth), strategies=("ps", "ralp"))
        if "ralp" not in plan.predictions:  # no Dense layer: nothing to split, no speedup to report
            from asv_runner.benchmarks.mark import SkipNotImplemented

            raise SkipNotImplemented(f"{model} has no dense layer")
        return plan.predictions["ps"].step_time_s / plan.predictions["ralp"].step_time_s
