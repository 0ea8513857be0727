"""The bridge from a run's settings to the analyzer: which plan, what it predicts.

Both the launcher side (to record predictions beside measurements, and to
launch the right number of ranks for ``auto``) and rank 0 of a direct
``mpirun ... python -m bench.run --strategy auto`` call ``plan_for``.
Without --hardware the analyzer uses this machine's calibrated throughput
('local'); without --bandwidth it assumes 10 Gbit/s links (recorded).
``--compression auto`` lets the analyzer pick the codec too (for the given
strategy, or together with the strategy under ``--strategy auto``).
"""
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Dict, Optional

from bench.config import RunConfig
from bench.errors import UserError

DEFAULT_BANDWIDTH = "10gbit"


@dataclass
class RunPlan:
    strategy: str                  # what auto runs: ps | horovod | ralp
    cut: Optional[str]             # cut of the chosen plan (ralp only)
    ralp_cut: Optional[str]        # where ralp would split, even when not chosen
    reason: str
    compression: str = "none"      # the codec the plan assumes (the analyzer's pick under auto)
    predictions: Dict[str, object] = field(default_factory=dict)  # strategy -> Prediction


@lru_cache(maxsize=16)
def model_profile(model):
    """The profile of a model: a zoo name or any ModelSpec (a user's model, --input-shape...)."""
    from bench.models import get_model
    from ralp.profile import profile_built

    return profile_built(lambda: get_model(model))


def settle_model(cfg: RunConfig) -> RunConfig:
    """The driver's check of a user's model, before any rank starts: build it once, refuse
    what no strategy can train, and tell the ranks its input shape, classes and file hash
    (they are recorded in the row, so the run can be repeated). Zoo models pass untouched."""
    from bench.models.build import settled_spec
    from bench.models.sources import format_shape, model_digest

    spec = cfg.model_spec()
    if spec.kind == "zoo":
        return cfg
    settled = settled_spec(spec)
    cfg.input_shape, cfg.classes = format_shape(settled.input_shape), settled.num_classes
    cfg.model_sha256 = model_digest(spec)
    return cfg


def hardware_for(cfg: RunConfig):
    """The analyzer's hardware: a preset or file as given; without one, this machine measured
    under the run's per-host CPU quota (bench/calibration.py)."""
    from bench.calibration import resolve_hardware

    return resolve_hardware(cfg.hardware or "local", cfg.cpus_per_host or None,
                            **cfg.link(DEFAULT_BANDWIDTH).hardware_overrides())


def timing_for(cfg: RunConfig):
    """The model's own step measured under the host quota (None with a preset, a hardware file,
    or --calibration hardware): full model at B, RALP's tower at B and head at W x B."""
    if (cfg.hardware or "local") != "local" or cfg.calibration != "model":
        return None
    from bench.calibration import model_timing
    from ralp.cost_model import ModelTiming

    cut = first_cut(cfg)
    t = model_timing(cfg.model_spec(), cfg.batch_size, cfg.workers, cut, cfg.cpus_per_host or None)
    return ModelTiming(cfg.batch_size, cfg.workers, t["full_s"], cut, t.get("tower_s"), t.get("head_s"))


def plan_for(cfg: RunConfig) -> RunPlan:
    from ralp.analyzer import analyze
    from ralp.cost_model import STRATEGIES

    profile = model_profile(cfg.model_spec())
    pick_codec = cfg.compression == "auto"
    # Under --compression auto a fixed strategy keeps its strategy; only the codec is chosen.
    strategies = [cfg.strategy] if pick_codec and cfg.strategy in STRATEGIES else STRATEGIES
    plan = analyze(profile, batch_size=cfg.batch_size, workers=cfg.workers, ps=cfg.ps,
                   hardware=hardware_for(cfg), timing=timing_for(cfg), strategies=strategies,
                   compression="auto" if pick_codec else _codec_or_none(cfg.compression),
                   ps_placement=cfg.ps_placement, micro_batches=cfg.micro_batches)
    ralp_cut = plan.cut if plan.strategy == "ralp" else _ralp_cut(plan, profile)
    return RunPlan(plan.strategy, plan.cut, ralp_cut, plan.reason, plan.compression or "none",
                   dict(plan.predictions))


@dataclass(frozen=True)
class Resolved:
    """What actually runs: the one shape of a plan that the driver, the ranks (rank 0 sends it
    to the others) and the rows share. ``compression`` is concrete (never 'auto')."""
    strategy: str
    cut: Optional[str]
    compression: str
    reason: Optional[str] = None


def resolve(cfg: RunConfig) -> Resolved:
    """What actually runs: strategy, cut and codec ('auto' in either asks the analyzer).

    The launcher calls this to start the right ranks and record the plan; rank 0 of a
    direct mpirun calls it too, so both paths agree."""
    from bench.strategy_specs import SPECS

    splits = cfg.strategy in SPECS and SPECS[cfg.strategy].splits
    if cfg.strategy != "ralp" and splits and cfg.compression != "auto":
        # Run on its own, the hybrid splits where RALP's FC head starts, or at --cut (no analyzer
        # run, so no calibration); under auto it takes the analyzer's cut, below.
        return Resolved(cfg.strategy, _split_at(cfg, cfg.strategy, cfg.cut or first_cut(cfg)), cfg.compression)
    if cfg.strategy not in ("ralp", "auto") and cfg.compression != "auto":
        return Resolved(cfg.strategy, None, cfg.compression)
    if cfg.strategy == "ralp" and cfg.cut and cfg.compression != "auto":
        # --cut is checked by the driver (check_cut) before launch; rank 0 of a launched run
        # must not profile the model again on its host's slice of a core.
        return Resolved("ralp", cfg.cut, cfg.compression)
    plan = plan_for(cfg)
    strategy = plan.strategy if cfg.strategy == "auto" else cfg.strategy
    cut = None
    if SPECS[strategy].splits:
        cut = _split_at(cfg, strategy, cfg.cut or (plan.cut if plan.strategy == strategy else None) or plan.ralp_cut)
    return Resolved(strategy, cut, plan.compression, plan.reason)


def _split_at(cfg: RunConfig, strategy: str, cut: Optional[str]) -> str:
    """A split strategy's cut, or its refusal with the reason (a model without a dense layer)."""
    if cut is None:
        raise UserError(f"{cfg.model} has no cut point before a dense layer; {strategy} cannot split it "
                        f"(use --strategy ps or horovod)")
    return cut


def first_cut(cfg: RunConfig) -> Optional[str]:
    """Where RALP's FC head starts in this run's model (None: no dense layer)."""
    return model_profile(cfg.model_spec()).first_dense_cut()


def check_head_shards(cfg: RunConfig, strategy: str, cut: Optional[str] = None):
    """ralp-hybrid with --ps > 1 shards its head: the head after ``cut`` must be a Dense chain
    (ralp/head_chain.py); refused in one line otherwise. The driver's check, before any rank
    starts (rank 0 must not profile the model again on its slice of a core)."""
    from bench.strategy_specs import AUTO, spec_of
    from ralp.strategy_costs import SHARDED_HEAD

    if strategy == AUTO or spec_of(strategy).priced_as not in SHARDED_HEAD or cfg.ps == 1:
        return  # auto: checked again on the plan it resolves to (bench/harness.py run_one)
    cut = cut or first_cut(cfg)
    if cut is None:
        return  # no split at all: _split_at says so
    from ralp.head_chain import head_chain

    widths, why = head_chain(model_profile(cfg.model_spec()), cut)
    if widths is None:
        raise UserError(f"ralp-hybrid cannot shard {cfg.model}'s head over --ps {cfg.ps} PS tasks: {why}; "
                        "use --ps 1")


def check_cut(cfg: RunConfig):
    """--cut must name one of the model's cut points (the driver's check, before any rank starts)."""
    cuts = model_profile(cfg.model_spec()).cut_points
    if cfg.cut not in cuts:
        raise UserError(f"cannot cut {cfg.model} after {cfg.cut!r}; valid cut points: {', '.join(cuts) or 'none'}")


def _codec_or_none(spec):
    return None if spec in (None, "none") else spec


def _ralp_cut(plan, profile):
    prediction = plan.predictions.get("ralp")
    cut = getattr(prediction, "cut", None) if prediction is not None else None
    return cut or profile.first_dense_cut()


def predict(cfg: RunConfig, strategy: str, cut: Optional[str]):
    """The cost model's figures for exactly what ran (None for ps-async: no model of it)."""
    from ralp.cost_model import predict as cost_predict
    from ralp.strategy_costs import PIPELINED

    from bench.strategy_specs import spec_of

    spec = spec_of(strategy)
    if spec.priced_as is None:
        return None
    workers = 1 if spec.one_batch_per_step else cfg.workers
    return cost_predict(model_profile(cfg.model_spec()), spec.priced_as, workers=workers, batch_size=cfg.batch_size,
                        hardware=hardware_for(cfg), ps=cfg.ps, cut=cut, timing=timing_for(cfg),
                        compression=_codec_or_none(cfg.compression), ps_placement=cfg.ps_placement,
                        micro_batches=cfg.micro_batches if spec.priced_as in PIPELINED else 1)
