"""The bridge from a run's settings to the analyzer: which plan, what it predicts.

Both the launcher side (to record predictions beside measurements, and to
launch the right number of ranks for ``auto``) and rank 0 of a direct
``mpirun ... python -m bench.run --strategy auto`` call ``plan_for``.
Without --hardware the analyzer uses this machine's calibrated throughput
('local'); without --bandwidth it assumes 10 Gbit/s links (recorded).
"""
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Dict, Optional

from bench.config import RunConfig

DEFAULT_BANDWIDTH = "10gbit"


@dataclass
class RunPlan:
    strategy: str                  # what auto runs: ps | horovod | ralp
    cut: Optional[str]             # cut of the chosen plan (ralp only)
    ralp_cut: Optional[str]        # where ralp would split, even when not chosen
    reason: str
    predictions: Dict[str, object] = field(default_factory=dict)  # strategy -> Prediction


@lru_cache(maxsize=16)
def model_profile(model_name: str):
    from bench.models import get_model
    from ralp.profile import profile_model

    return profile_model(get_model(model_name))


def hardware_for(cfg: RunConfig):
    from ralp.hardware import load_hardware

    return load_hardware(cfg.hardware or "local", bandwidth=cfg.bandwidth or DEFAULT_BANDWIDTH)


def plan_for(cfg: RunConfig) -> RunPlan:
    from ralp.analyzer import analyze

    profile = model_profile(cfg.model)
    plan = analyze(profile, batch_size=cfg.batch_size, workers=cfg.workers, ps=cfg.ps,
                   hardware=hardware_for(cfg), compression=None if cfg.compression == "none" else cfg.compression)
    ralp_cut = plan.cut if plan.strategy == "ralp" else _ralp_cut(plan, profile)
    return RunPlan(plan.strategy, plan.cut, ralp_cut, plan.reason, dict(plan.predictions))


def _ralp_cut(plan, profile):
    prediction = plan.predictions.get("ralp")
    cut = getattr(prediction, "cut", None) if prediction is not None else None
    return cut or profile.first_dense_cut()


def predict(cfg: RunConfig, strategy: str, cut: Optional[str]):
    """The cost model's figures for exactly what ran (None for ps-async: no model of it)."""
    from ralp.cost_model import predict as cost_predict

    if strategy not in ("ps", "horovod", "ralp"):
        return None
    return cost_predict(model_profile(cfg.model), strategy, workers=cfg.workers, batch_size=cfg.batch_size,
                        hardware=hardware_for(cfg), ps=cfg.ps, cut=cut,
                        compression=None if cfg.compression == "none" else cfg.compression)
