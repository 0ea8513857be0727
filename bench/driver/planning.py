"""The bridge from a run's settings to the analyzer: which plan, what it predicts.

Both the launcher side (to record predictions beside measurements, and to
launch the right number of ranks for ``auto``) and rank 0 of a direct
``mpirun ... python -m bench.run --strategy auto`` call ``plan_for``.
Without --hardware the analyzer uses this machine's calibrated throughput
('local'); without --bandwidth it assumes 10 Gbit/s links (recorded).
``--compression auto`` lets the analyzer pick the codec too (for the given
strategy, or together with the strategy under ``--strategy auto``).
"""
import json
import math
import platform
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache
from typing import Dict, Optional

from bench.core.config import CALIBRATIONS, NUMBERS_OR_AUTO, RunConfig
from bench.core.errors import UserError
from bench.core.horovod_settings import HIERARCHICAL_NEEDS_NCCL
from bench.core.strategy_specs import AUTO, SPECS, spec_of
from bench.driver import calibration
from bench.driver.calibration import model_timing, resolve_hardware
from bench.driver.profile_cache import cached_profile
from bench.models import get_model
from bench.models.build import settled_spec
from bench.models.sources import format_shape, get_spec, model_digest
from bench.store.environment import horovod_nccl_code
from ralp.analyzer import analyze
from ralp.cost_model import STRATEGIES, ModelTiming, predict as cost_predict
from ralp.hardware import Hardware
from ralp.head_chain import head_chain
from ralp.profile import profile_built
from ralp.step_cost import HYBRID_BUCKET_MB
from ralp.strategy_costs import PIPELINED, SHARDED_HEAD

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
    """The profile of a model: a zoo name or any ModelSpec (a user's model, --input-shape...);
    a zoo model's from the disk cache where an earlier process profiled it (profile_cache.py)."""
    spec = get_spec(model) if isinstance(model, str) else model
    return cached_profile(spec, lambda: profile_built(lambda: get_model(spec)))


def settle_model(cfg: RunConfig) -> RunConfig:
    """The driver's check of a user's model, before any rank starts: build it once, refuse
    what no strategy can train, and tell the ranks its input shape, classes and file hash
    (they are recorded in the row, so the run can be repeated). Zoo models pass untouched."""
    spec = cfg.model_spec()
    if spec.kind == "zoo":
        return cfg
    settled = settled_spec(spec)
    return replace(cfg, input_shape=format_shape(settled.input_shape), classes=settled.num_classes,
                   model_sha256=model_digest(spec))


def hardware_for(cfg: RunConfig):
    """The analyzer's hardware: a preset or file as given; without one, this machine measured
    under the run's per-host CPU quota, or the cluster host ``cfg.calibrate_on`` as its ranks run
    there (bench/driver/calibration.py; which host is the launcher's business, not the plan's)."""
    return resolve_hardware(cfg.hardware or "local", cfg.cpus_per_host or None, cfg.calibrate_on,
                            **cfg.link(DEFAULT_BANDWIDTH).hardware_overrides())


def timing_for(cfg: RunConfig):
    """The model's own step measured under the host quota, or on host ``cfg.calibrate_on`` (None
    with a preset, a hardware file, or --calibration hardware): full model at B, RALP's tower at
    B and head at W x B."""
    if (cfg.hardware or "local") != "local" or cfg.calibration != "model":
        return None

    cut = first_cut(cfg)
    t = model_timing(cfg.model_spec(), cfg.batch_size, cfg.workers, cut, cfg.cpus_per_host or None,
                     cfg.calibrate_on)
    return ModelTiming(cfg.batch_size, cfg.workers, t["full_s"], cut, t.get("tower_s"), t.get("head_s"))


def plan_for(cfg: RunConfig) -> RunPlan:
    profile = model_profile(cfg.model_spec())
    pick_codec = cfg.compression == "auto"
    # Under --compression auto a fixed strategy keeps its strategy; only the codec is chosen.
    strategies = [cfg.strategy] if pick_codec and cfg.strategy in STRATEGIES else STRATEGIES
    plan = analyze(profile, batch_size=cfg.batch_size, workers=cfg.workers, ps=cfg.ps,
                   hardware=hardware_for(cfg), timing=timing_for(cfg), strategies=strategies,
                   compression="auto" if pick_codec else _codec_or_none(cfg.compression),
                   ps_placement=cfg.ps_placement,
                   micro_batches=None if cfg.micro_batches == AUTO else cfg.micro_batches,
                   workers_per_host=cfg.workers_per_host, hierarchical=cfg.horovod_hierarchical,
                   # the micro-batches and buckets the run will have, or (auto) the search's, which it then takes
                   hybrid_bucket_mb=None if cfg.hybrid_bucket_mb == AUTO else cfg.hybrid_bucket_mb)
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
    micro_batches: int = 1                      # the hybrid's pipelined micro-batches (never 'auto')
    hybrid_bucket_mb: float = HYBRID_BUCKET_MB  # its ring buckets (never 'auto')

    def applied_to(self, cfg: RunConfig) -> RunConfig:
        """``cfg`` as the ranks and the cost model take it: the concrete codec, micro-batches and buckets."""
        return replace(cfg, compression=self.compression, micro_batches=self.micro_batches,
                       hybrid_bucket_mb=self.hybrid_bucket_mb)


def resolve(cfg: RunConfig) -> Resolved:
    """What actually runs: strategy, cut, codec and the hybrid's micro-batches and buckets ('auto'
    in any of them asks the analyzer, whose micro-batches and buckets a hybrid then takes)."""
    plan = _resolve(cfg)
    return replace(plan, **{name: getattr(cfg, name) for name in NUMBERS_OR_AUTO if getattr(cfg, name) != AUTO})


def _resolve(cfg: RunConfig) -> Resolved:
    """What actually runs: strategy, cut and codec ('auto' in either asks the analyzer).

    The launcher calls this to start the right ranks and record the plan; rank 0 of a
    direct mpirun calls it too, so both paths agree."""
    splits = cfg.strategy in SPECS and SPECS[cfg.strategy].splits
    search_hybrid = (any(getattr(cfg, name) == AUTO for name in NUMBERS_OR_AUTO) and cfg.strategy in SPECS
                     and SPECS[cfg.strategy].priced_as in PIPELINED)
    if cfg.strategy != "ralp" and splits and cfg.compression != "auto" and not search_hybrid:
        # Run on its own, the hybrid splits where RALP's FC head starts, or at --cut (no analyzer
        # run, so no calibration); under auto it takes the analyzer's cut, below.
        return Resolved(cfg.strategy, _split_at(cfg, cfg.strategy, cfg.cut or first_cut(cfg)), cfg.compression)
    if cfg.strategy not in ("ralp", "auto") and cfg.compression != "auto" and not search_hybrid:
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
    hybrid = plan.predictions.get(spec_of(strategy).priced_as) if spec_of(strategy).priced_as in PIPELINED else None
    if hybrid is None:
        return Resolved(strategy, cut, plan.compression, plan.reason)
    return Resolved(strategy, cut, plan.compression, plan.reason, hybrid.micro_batches, hybrid.hybrid_bucket_mb)


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
    if strategy == AUTO or spec_of(strategy).priced_as not in SHARDED_HEAD or cfg.ps == 1:
        return  # auto: checked again on the plan it resolves to (bench/driver/harness.py run_one)
    cut = cut or first_cut(cfg)
    if cut is None:
        return  # no split at all: _split_at says so

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


def pricing(cfg: RunConfig, stored: Optional[str] = None):
    """What prices ``cfg``: (its Hardware, the model's measured step or None), from a row's
    ``priced_with`` when given, else from this machine's calibration (``hardware_for``,
    ``timing_for``: measured or cached now)."""
    if stored:
        inputs = json.loads(stored)
        timing = inputs.get("timing")
        return Hardware(**inputs["hardware"]), ModelTiming(**timing) if timing else None
    return hardware_for(cfg), timing_for(cfg)


def priced_with(inputs) -> str:
    """``pricing``'s inputs as the row's ``priced_with`` JSON. Why rows keep it: a calibration is
    measured again as its cache ages and the machine's speed drifts (two runs a day apart
    re-priced with one day's cache fell from 58 to 40 of 60 cells within +-20%), so a stored row
    is priced again from what priced it, not from what the cache holds today (``reprice``)."""
    hardware, timing = inputs
    return json.dumps({"hardware": asdict(hardware), "timing": asdict(timing) if timing else None}, sort_keys=True)


def priced(strategy: str) -> bool:
    """Does the cost model price ``strategy`` (ps-async: no model of it)?"""
    return spec_of(strategy).priced_as is not None


def predict(cfg: RunConfig, strategy: str, cut: Optional[str], overlap: bool = False, inputs=None):
    """The cost model's figures for exactly what ran (None for ps-async: no model of it);
    ``overlap``: its bound instead (``bound``); ``inputs``: ``pricing``'s (default: ``pricing(cfg)``)."""
    spec = spec_of(strategy)
    if spec.priced_as is None:
        return None
    workers = 1 if spec.one_batch_per_step else cfg.workers
    hardware, timing = inputs or pricing(cfg)
    return cost_predict(model_profile(cfg.model_spec()), spec.priced_as, workers=workers, batch_size=cfg.batch_size,
                        hardware=hardware, ps=cfg.ps, cut=cut, timing=timing,
                        compression=_codec_or_none(cfg.compression), ps_placement=cfg.ps_placement,
                        hybrid_bucket_mb=cfg.hybrid_bucket_mb, hierarchical=cfg.horovod_hierarchical,
                        micro_batches=cfg.micro_batches if spec.priced_as in PIPELINED else 1, overlap=overlap,
                        workers_per_host=1 if spec.one_batch_per_step else cfg.workers_per_host)


def bound(cfg: RunConfig, strategy: str, cut: Optional[str], inputs=None) -> Optional[float]:
    """The least step time this plan allows on its hardware (None where ``predict`` has no model).

    Why: a measured step says how fast a plan ran, not how close it came to what the machines
    allow; measured over this, a cell reads as a fraction of the possible (issue 35). It is the
    cost model's own pricing of the plan (same bytes, FLOPs, codec work and calibration as the
    row's prediction) with every resource busy at once (``overlap``: ralp/cost_model.py): the
    largest of each host's compute under its CPU cap (a colocated PS task's work on its worker's
    host), each link direction's bytes at line rate plus one latency. It leaves out what orders
    the work (the tower waiting for the head, the pull for the update), TensorFlow's transport CPU
    and start-up: the slack a better implementation of the same plan could remove."""
    p = predict(cfg, strategy, cut, overlap=True, inputs=inputs)
    return None if p is None else p.step_time_s


def bound_of(profile, prediction, hardware, compression=None, timing=None):
    """``bound`` for one of the analyzer's predictions: the same plan (strategy, cut, PS layout,
    micro-batches, codec) priced with every resource busy at once, as a Prediction (its
    ``step_time_s`` the bound, its ``bottleneck`` the resource that sets it)."""
    layout = prediction.ps_placement or "dedicated"
    per_host = getattr(prediction, "workers_per_host", None)  # the workers sharing a host's NIC, as it was priced
    return cost_predict(profile, prediction.strategy, workers=prediction.workers, batch_size=prediction.batch_size,
                        hardware=hardware, ps=1 if layout == "colocated" else max(1, prediction.ps),
                        cut=prediction.cut, compression=_codec_or_none(compression), timing=timing,
                        ps_placement=layout, micro_batches=prediction.micro_batches, overlap=True,
                        hierarchical=getattr(prediction, "hierarchical", False),
                        **({"workers_per_host": per_host} if per_host else {}),
                        **({"hybrid_bucket_mb": prediction.hybrid_bucket_mb}
                           if getattr(prediction, "hybrid_bucket_mb", None) is not None else {}))


def _stored_plan(row):
    """(strategy, codec, cut) a stored row ran: an ``auto`` row's plan, else its strategy."""
    from bench.store.results import is_missing  # lazy: pandas loads only where rows are read or written

    plan = row.get("plan") if row.get("strategy") == "auto" and not is_missing(row.get("plan")) else row["strategy"]
    strategy, _, codec = str(plan).partition("+")
    return strategy, codec, None if is_missing(row.get("cut_layer")) else row["cut_layer"]


def reprice(row):
    """A stored row's plan priced again by this checkout's cost model (a Prediction; None where
    the row cannot say what ran, or its plan has no model): from what priced it (``priced_with``)
    where the row says, else, on the machine that priced it, from its calibration cache today
    (measuring nothing; rows older than ``priced_with``), as the row's configuration and links
    describe the run."""
    from bench.store.results import is_missing  # lazy: pandas loads only where rows are read or written

    if row.get("status") != "ok" or is_missing(row.get("predicted_step_time_s")):
        return None
    strategy, codec, cut = _stored_plan(row)
    stored = None if is_missing(row.get("priced_with")) else row["priced_with"]
    if stored is None and row.get("hostname") != platform.node():
        return None  # another machine's row, and this machine's cache is not what priced it
    for kind in CALIBRATIONS[:1] if stored else CALIBRATIONS:  # with priced_with, any kind names its inputs
        cfg = _stored_config(row, strategy, codec, kind)
        if cfg is None or not (stored or _calibrated(cfg)):
            continue
        try:
            return predict(cfg, strategy, cut, inputs=pricing(cfg, stored))
        except UserError:  # the cost model no longer prices this row's plan
            return None
    return None


def stored_bound(row) -> Optional[float]:
    """The bound of a stored row written before rows carried one (``bound_step_time_s``), priced
    again from the row's configuration; None where that would be a guess.

    Rows did not record which calibration priced them (a preset, a hardware file, or this machine
    under the row's CPU cap, by micro-benchmarks or the model's own step), and the cost model
    changes between runs. So a row is priced again only on the machine that priced it, only with
    a calibration its cache still holds (nothing is measured here), and only where pricing it
    again gives the row's own predicted step time: then the inputs are the row's, and so is the
    bound. Committed rows are never rewritten: the report computes this when it reads them."""
    from bench.store.results import is_missing  # lazy: pandas loads only where rows are read or written

    predicted = row.get("predicted_step_time_s")
    if row.get("status") != "ok" or is_missing(predicted) or row.get("hostname") != platform.node():
        return None
    strategy, codec, cut = _stored_plan(row)
    for kind in CALIBRATIONS:
        cfg = _stored_config(row, strategy, codec, kind)
        if cfg is None or not _calibrated(cfg):
            continue
        try:
            inputs = pricing(cfg)
            again = predict(cfg, strategy, cut, inputs=inputs)
        except UserError:  # the cost model no longer prices this row's plan: nothing to reproduce
            continue
        if again is not None and math.isclose(again.step_time_s, predicted, rel_tol=1e-6):
            return bound(cfg, strategy, cut, inputs=inputs)
    return None


def _stored_config(row, strategy: str, codec: str, calibration: str) -> Optional[RunConfig]:
    """The RunConfig a stored row's prediction was priced from: its row columns, its links (the
    cluster's, which the driver hands the analyzer), its CPU cap, ``calibration``; None when the
    row cannot make one (an unknown strategy or model)."""
    from bench.store.results import is_missing  # lazy: pandas loads only where rows are read or written

    if strategy not in SPECS:
        return None
    fields = {name: row.get(column) for name, column in RunConfig.row_fields()}
    links = {"bandwidth": row.get("link_bps"), "ps_bandwidth": row.get("ps_link_bps"), "latency": row.get("latency_s"),
             "cpus_per_host": row.get("cpus_per_host")}
    fields.update({k: v for k, v in links.items() if not is_missing(v)})
    # numpy scalars (a frame's cells) as Python's: the cost model checks its counts are ints
    fields = {k: (v.item() if hasattr(v, "item") else v) for k, v in fields.items() if not is_missing(v)}
    fields.update(strategy=strategy, calibration=calibration, **({"compression": codec} if codec else {}))
    try:
        return RunConfig(**fields)
    except (TypeError, UserError):
        return None


def _calibrated(cfg: RunConfig) -> bool:
    """Does this machine's calibration cache hold what ``predict(cfg, ...)`` reads (so that
    pricing measures nothing)? Hardware presets and files need none; a row does not say it used
    one, so only this machine's own figures are looked up."""
    cached = calibration._load()  # the cache's entries, read without measuring
    cores = cfg.cpus_per_host or None
    try:
        if calibration.hardware_key(cores) not in cached:
            return False
        return cfg.calibration != "model" or calibration.model_key(
            cfg.model_spec(), cfg.batch_size, cfg.workers, first_cut(cfg), cores) in cached
    except UserError:  # a model this machine cannot build
        return False


def check_hierarchical(hierarchical: bool, strategy: str):
    """The driver's check, before any rank starts (the run command, and each sweep point's plan):
    Horovod without NCCL ignores HOROVOD_HIERARCHICAL_ALLREDUCE, and the row would call a flat
    ring hierarchical. Each rank asks its own Horovod again (``init_horovod``): a host's install
    may differ from the driver's."""
    if hierarchical and strategy == "horovod" and not horovod_nccl_code():
        raise UserError(HIERARCHICAL_NEEDS_NCCL)
