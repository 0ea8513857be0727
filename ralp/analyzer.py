"""Choose how to train a model: sync PS, ring all-reduce, or a split (FC-on-PS, or the hybrid
placement) at the best cut.

Why: the point of RALP is a decision (split or not, how, and where), and a decision is
only useful with its reason. The analyzer predicts every requested strategy,
evaluates each split strategy (``SPLIT_STRATEGIES``: ralp, ralp-hybrid) at every valid cut
point, keeps the fastest, and explains the choice with the numbers that decided it. Splitting must beat the best unsplit
strategy by at least ``MIN_SPLIT_GAIN`` (predictions are approximate and a split
adds moving parts); a model without Dense layers gets "no split possible".

Candidate cuts: by default the cut just before the first Dense layer and every cut
after it, so the PS holds only FC layers (FC-on-PS). ``all_cuts=True`` also tries
earlier cuts, which put convolutions on the PS: the PS then computes them for all
W*B images, which stops scaling as W grows and needs a PS as fast as a worker.

Compression: ``compression="auto"`` (or a list of codecs) repeats the analysis for each
codec and keeps the fastest plan, preferring the less lossy codec (earlier in the list)
unless a lossier one is at least ``MIN_CODEC_GAIN`` faster: fewer bytes are worth an
accuracy risk only when they buy time. ``Plan.compression`` names the codec chosen.
"""
from dataclasses import dataclass, field
from typing import Dict, Optional, Sequence, Union

from bench.errors import UserError
from ralp.cost_model import (SPLIT_STRATEGIES, STRATEGIES, STRATEGY_LABELS, UNCOMPRESSED_ONLY, Prediction,
                             parse_compression, predict)
from ralp.hardware import Hardware, load_hardware
from ralp.profile import ModelProfile, profile_model

# A split must be predicted at least 5% faster than the best unsplit strategy: the hybrid's
# predicted 3-4% over the ring on ResNet-50 / Inception-v3 (FC layers under 10% of the bytes)
# is well inside the cost model's step-time error on the emulated cluster (-21% to +4% in
# results/hybrid), so it is not a reason to add a PS.
MIN_SPLIT_GAIN = 0.05
# A lossier codec must make the predicted step at least 10% faster to be chosen: the cost model
# counts codec bytes and elementwise work but not fixed per-tensor costs (op launches, the scale
# tensor's own transfer), which on lenet_mnist at 1 Gbit/s (emulated, 2 cores) turned RALP's
# predicted 5% gain from fp16 into 13% fewer images/sec.
MIN_CODEC_GAIN = 0.10
AUTO_COMPRESSIONS = ("none", "fp16", "int8", "topk:0.01")  # least to most lossy


@dataclass
class Plan:
    """The chosen strategy, where to cut (None: do not split), and why."""
    strategy: str
    cut: Optional[str]
    predictions: Dict[str, Prediction]
    reason: str
    ralp_by_cut: Dict[str, Prediction] = field(default_factory=dict)
    split_possible: bool = True
    compression: Optional[str] = None       # the codec the predictions assume (None: fp32)
    by_compression: Dict[str, "Plan"] = field(default_factory=dict)  # each codec's plan (auto only)

    @property
    def split(self) -> bool:
        return self.strategy in SPLIT_STRATEGIES


def _mb(n_bytes: float) -> str:
    return f"{n_bytes / 1e6:,.1f} MB"


def _seconds(t: float) -> str:
    return f"{t:.3g} s"


def candidate_cuts(profile, all_cuts: bool = False):
    """Cut points FC-on-PS may use (see module docstring); empty without a Dense layer."""
    first = profile.first_dense_cut()
    if first is None:
        return []
    return list(profile.cut_points) if all_cuts else profile.cut_points[profile.cut_points.index(first):]


def _pick_ralp(by_cut: Dict[str, Prediction], cut_order) -> Optional[Prediction]:
    """Fastest cut; among equal times (within 1e-9) the latest one, i.e. closest to the FC layers."""
    if not by_cut:
        return None
    fastest = min(p.step_time_s for p in by_cut.values())
    tied = [c for c in cut_order if c in by_cut and by_cut[c].step_time_s <= fastest * (1 + 1e-9)]
    return by_cut[tied[-1]]


def _validate(batch_size, workers, ps, strategies):
    for name, value in (("batch size", batch_size), ("workers", workers), ("ps", ps)):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise UserError(f"{name} must be a positive integer, got {value!r}")
    unknown = [s for s in strategies if s not in STRATEGIES]
    if unknown or not strategies:
        raise UserError(f"unknown strategies {unknown}; choose from {', '.join(STRATEGIES)}")


def compression_candidates(compression: Union[None, str, Sequence[str]]):
    """The codecs to evaluate: one (None / a spec), AUTO_COMPRESSIONS ('auto') or a given list."""
    if compression is None or isinstance(compression, str) and compression.strip().lower() != "auto":
        specs = [compression]
    elif isinstance(compression, str):
        specs = list(AUTO_COMPRESSIONS)
    else:
        specs = list(compression)
        if not specs:
            raise UserError("give at least one compression to compare (e.g. none, fp16, int8)")
    normalized = []
    for spec in specs:
        spec = None if spec is None else str(spec).strip().lower()
        parse_compression(spec)  # UserError for a bad spec
        spec = None if spec in (None, "", "none") else spec
        if spec not in normalized:
            normalized.append(spec)
    return normalized


def analyze(model_or_profile, *, batch_size: int, workers: int, ps: int = 1, hardware=None,
            strategies: Sequence[str] = STRATEGIES, compression: Union[None, str, Sequence[str]] = None,
            overlap: bool = False, all_cuts: bool = False, timing=None, ps_placement: str = "dedicated") -> Plan:
    """Predict each strategy and pick the fastest; see module docstring for the split and codec rules."""
    _validate(batch_size, workers, ps, strategies)
    profile = model_or_profile if isinstance(model_or_profile, ModelProfile) else profile_model(model_or_profile)
    if not isinstance(hardware, Hardware):
        hardware = load_hardware(hardware)
    candidates = compression_candidates(compression)
    plans = {spec: _analyze_one(profile, batch_size, workers, ps, hardware, strategies, spec, overlap, all_cuts,
                                timing, ps_placement)
             for spec in candidates}
    if len(plans) == 1:
        return plans[candidates[0]]
    chosen = plans[candidates[0]]
    for spec in candidates[1:]:
        if _step_time(plans[spec]) < _step_time(chosen) * (1 - MIN_CODEC_GAIN):
            chosen = plans[spec]
    chosen.by_compression = {spec or "none": plan for spec, plan in plans.items()}
    times = ", ".join(f"{spec or 'none'} {_seconds(_step_time(plan))} ({plan.strategy})"
                      for spec, plan in plans.items())
    chosen.reason += (f" Compression: {chosen.compression or 'none'} (predicted per step: {times}; a lossier "
                      f"codec must be {MIN_CODEC_GAIN:.0%} faster to be chosen).")
    return chosen


def _step_time(plan: Plan) -> float:
    return plan.predictions[plan.strategy].step_time_s


def _analyze_one(profile, batch_size, workers, ps, hardware, strategies, compression, overlap, all_cuts,
                 timing=None, ps_placement="dedicated") -> Plan:
    common = dict(workers=workers, batch_size=batch_size, hardware=hardware, ps=ps,
                  overlap=overlap, compression=compression, timing=timing)
    if compression is not None:  # strategies priced (and implemented) in fp32 only sit this codec out
        strategies = [s for s in strategies if s not in UNCOMPRESSED_ONLY]
    predictions = {s: predict(profile, s, **common, ps_placement=ps_placement)
                   for s in strategies if s not in SPLIT_STRATEGIES}
    split_possible = profile.first_dense_cut() is not None
    cuts = candidate_cuts(profile, all_cuts)
    by_cut = {s: {cut: predict(profile, s, cut=cut, **common) for cut in cuts}
              for s in SPLIT_STRATEGIES if s in strategies}
    best_splits = [p for p in (_pick_ralp(c, profile.cut_points) for c in by_cut.values()) if p is not None]
    for p in best_splits:
        predictions[p.strategy] = p
    best_split = min(best_splits, key=lambda p: (p.step_time_s, p.worker_bytes), default=None)

    unsplit = min((p for s, p in predictions.items() if s not in SPLIT_STRATEGIES),
                  key=lambda p: (p.step_time_s, p.worker_bytes), default=None)  # ties: fewer bytes
    if best_split is not None and (unsplit is None or
                                   best_split.step_time_s < unsplit.step_time_s * (1 - MIN_SPLIT_GAIN)):
        chosen = best_split
    else:
        chosen = unsplit
    if chosen is None:  # only split strategies requested on a model that cannot be split
        raise UserError(f"no split possible: {profile.name} has no dense layer; "
                        "add 'ps' or 'horovod' to the strategies")
    requested = any(s in strategies for s in SPLIT_STRATEGIES)
    reason = _reason(profile, chosen, predictions, best_split, split_possible, requested)
    return Plan(strategy=chosen.strategy, cut=chosen.cut if chosen.strategy in SPLIT_STRATEGIES else None,
                predictions=predictions, reason=reason, ralp_by_cut=by_cut.get("ralp", {}),
                split_possible=split_possible, compression=compression)


def _reason(profile, chosen, predictions, best_split, split_possible, split_requested) -> str:
    label = STRATEGY_LABELS
    sync_ps = predictions.get("ps")
    versus = f" vs {_mb(sync_ps.worker_bytes)} for sync PS" if sync_ps else ""
    if chosen.strategy in SPLIT_STRATEGIES:
        others = sorted((p for s, p in predictions.items() if s != chosen.strategy), key=lambda p: p.step_time_s)
        times = " and ".join(f"{_seconds(p.step_time_s)} ({label[p.strategy]})" for p in others)
        return (f"Split after {chosen.cut!r}: {label[chosen.strategy]} moves {_mb(chosen.worker_bytes)}/worker/step"
                f"{versus}; "
                f"predicted {_seconds(chosen.step_time_s)}" + (f" vs {times}" if times else "") +
                f". Bottleneck: {chosen.bottleneck}.")
    best = f"{label[chosen.strategy]} is predicted fastest at {_seconds(chosen.step_time_s)} per step " \
           f"(bottleneck: {chosen.bottleneck})."
    if not split_requested:
        return best
    if not split_possible:
        return f"No split possible: {profile.name} has no dense layer to place on the PS. " + best
    return (f"Do not split: the best split ({label[best_split.strategy]} after {best_split.cut!r}) moves "
            f"{_mb(best_split.worker_bytes)}/worker/step{versus} and is predicted at "
            f"{_seconds(best_split.step_time_s)}; " + best)
