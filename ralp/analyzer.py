"""Choose how to train a model: sync PS, ring all-reduce, or a split (FC-on-PS, or the hybrid
placement) at the best cut.

Why: the point of RALP is a decision (split or not, how, and where), and a decision is
only useful with its reason. The analyzer predicts every requested strategy,
evaluates each split strategy (``SPLIT_STRATEGIES``: ralp, ralp-hybrid) at every valid cut
point, keeps the fastest, and explains the choice with the numbers that decided it. Splitting must beat the best unsplit
strategy by at least ``MIN_SPLIT_GAIN`` (predictions are approximate and a split
adds moving parts); a model without Dense layers gets "no split possible". Of the two splits,
the hybrid must beat FC-on-PS by ``MIN_VARIANT_GAIN`` (it adds a ring over the workers and a
tower replica on each), as its sharded and pipelined variants must beat the plain hybrid.

Candidate cuts: by default the cut just before the first Dense layer and every cut
after it, so the PS holds only FC layers (FC-on-PS). ``all_cuts=True`` also tries
earlier cuts, which put convolutions on the PS: the PS then computes them for all
W*B images, which stops scaling as W grows and needs a PS as fast as a worker.

Compression: ``compression="auto"`` (or a list of codecs) repeats the analysis for each
codec and keeps the fastest plan, preferring the less lossy codec (earlier in the list)
unless a lossier one is at least ``MIN_CODEC_GAIN`` faster: fewer bytes are worth an
accuracy risk only when they buy time. ``Plan.compression`` names the codec chosen.

Layouts and pipelining (the joint search): the hybrid runs with its head sharded over S PS
tasks and with m pipelined micro-batches (ralp/cost_model.py prices both). ``micro_batches``
None searches m in ``MICRO_BATCHES`` (those dividing the batch); an int fixes it. With
``search_layouts`` the analyzer also tries sync PS in both layouts (dedicated PS hosts and one
PS task beside each worker) and the hybrid at every S in 1..``ps`` (``ps`` is then the most PS
hosts available); without it, a plan keeps the caller's ``ps`` and ``ps_placement``, which is
what a run needs: its one launch has exactly those PS tasks (bench/driver/planning.py), but it can
split its batch as it likes. Of the hybrid's (S, m) variants only the plain one (the fewest
PS tasks, no pipelining) and those ``MIN_VARIANT_GAIN`` faster than it qualify; of those within
that margin of the fastest, the analyzer takes the fewest PS tasks, then the fewest
micro-batches (see the constant). ``Plan`` records the S, m and layout it chose. Horovod on
hosts of several GPUs: with ``hierarchical=None`` (``ralp-bench analyze``) the analyzer prices
its hierarchical all-reduce beside the flat ring and takes it when ``MIN_VARIANT_GAIN`` faster
(``hierarchical_applies`` says where it differs); a run's plan prices what the run will do.
The hybrid's ring buckets likewise: ``hybrid_bucket_mb=None`` (``ralp-bench analyze``) prices each
unpipelined hybrid variant at its best cut with each of ``BUCKET_SIZES_MB`` (0: one fused ring after
the backward; pipelined variants ring once after the pipeline, where buckets change nothing);
a bucket layout must be ``MIN_VARIANT_GAIN`` faster than the fused ring, and of those within that
margin of the fastest the largest buckets (fewest rings) win; the reason says how a run asks for
it (``--hybrid-bucket-mb``). A number prices exactly that, as a run does.
"""
from dataclasses import dataclass, field
from typing import Dict, Optional, Sequence, Tuple, Union

from ralp.cost_model import (HYBRID_BUCKET_MB, PIPELINED, PS_PLACEMENTS, SHARDED_HEAD, SPLIT_STRATEGIES, STRATEGIES,
                             STRATEGY_LABELS, CODECS_OF, Prediction, parse_compression, predict, workers_on_each_host)
from ralp.errors import UserError
from ralp.hardware import Hardware, load_hardware
from ralp.head_chain import head_chain
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
# Sharding the hybrid's head over more PS tasks or pipelining its step must be predicted at least
# 5% faster than the plain hybrid, and a simpler variant within 5% of the fastest wins: the model prices
# bytes, FLOPs and one latency per micro-batch and phase, but not what grows with each extra part
# (per-micro-batch op launches and smaller, less efficient matmuls; one more host to provision,
# start and keep alive), and its step-time error on the emulated cluster (-21% to +4%) dwarfs
# the 0.4% that separates, e.g., VGG-16's head over 1 or 2 PS at 8 workers with 8 micro-batches.
# The same margin keeps RALP's own placement (FC-on-PS) over the hybrid, which adds a ring over the
# workers and a tower replica on each: in the four `./ci/main` runs of 2026-12-06 the hybrid was
# predicted 2.5-2.7% faster than ralp on alexnet_cifar (2 workers, 1 Gbit/s) and measured from 7.6%
# slower to 17% faster, a coin toss that `auto` kept losing half the time.
MIN_VARIANT_GAIN = 0.05
MICRO_BATCHES = (1, 2, 4, 8)  # m tried by the search (those dividing the batch)
# Ring buckets tried by the search (MiB of fp32 tower gradients; 0: one fused ring). Measured (run
# 20261206T231132Z-6bc186: 4 workers, links scaled to V100 + 10 GbE, 2 launches each): vgg_cifar's
# hybrid 1.17x (1 MiB) and 1.07x (4 MiB) the fused ring's speed, predicted 1.21x and 1.10x;
# alexnet_cifar 1.07x (1 MiB), predicted 1.13x. The model leaves out each ring's fixed cost, so it
# over-rates small buckets by a few percent, which the margin absorbs.
BUCKET_SIZES_MB = (0.0, 1.0, 4.0, 16.0)


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
    micro_batches: int = 1                  # the chosen plan's pipelined micro-batches
    ps: int = 1                             # PS tasks it runs with (hybrid: head shards S; horovod: 0)
    ps_placement: Optional[str] = "dedicated"  # sync PS's layout (None: no PS)
    hybrid_variants: Dict[Tuple[int, int], Prediction] = field(default_factory=dict)  # (S, m) -> best cut
    ps_layouts: Dict[str, Prediction] = field(default_factory=dict)  # sync PS per layout tried
    horovod_variants: Dict[str, Prediction] = field(default_factory=dict)  # "flat" / "hierarchical", where searched
    hybrid_buckets: Dict[float, Prediction] = field(default_factory=dict)  # ring buckets (MiB) -> the hybrid, where searched

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


def _validate(batch_size, workers, ps, strategies, micro_batches):
    for name, value in (("batch size", batch_size), ("workers", workers), ("ps", ps),
                        ("micro-batches", 1 if micro_batches is None else micro_batches)):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise UserError(f"{name} must be a positive integer, got {value!r}")
    unknown = [s for s in strategies if s not in STRATEGIES]
    if unknown or not strategies:
        raise UserError(f"unknown strategies {unknown}; choose from {', '.join(STRATEGIES)}")
    if micro_batches is not None and batch_size % micro_batches:
        raise UserError(f"batch size {batch_size} does not split into {micro_batches} equal micro-batches")
    return [m for m in MICRO_BATCHES if batch_size % m == 0] if micro_batches is None else [micro_batches]


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
            overlap: bool = False, all_cuts: bool = False, timing=None, ps_placement: str = "dedicated",
            search_layouts: bool = False, micro_batches: Optional[int] = None,
            workers_per_host: Optional[int] = None, hierarchical: Optional[bool] = False,
            hybrid_bucket_mb: Optional[float] = HYBRID_BUCKET_MB) -> Plan:
    """Predict each strategy and pick the fastest; see module docstring for the split, codec,
    layout and micro-batch rules. ``workers_per_host``: workers sharing a host's NIC (None: the
    hardware's ``gpus_per_host``; ralp/cost_model.py ``workers_on_each_host``). ``hierarchical``:
    Horovod's all-reduce as a run will do it (False: one flat ring; True: hierarchical), or None:
    both where hierarchical applies (``hierarchical_applies``), the hierarchical one taken when it
    is ``MIN_VARIANT_GAIN`` faster, and the reason says which and how to ask a run for it.
    ``hybrid_bucket_mb``: the hybrid's ring buckets as a run will have them, or None: searched
    (module docstring)."""
    if ps_placement not in PS_PLACEMENTS:
        raise UserError(f"unknown PS placement {ps_placement!r}; choose from {', '.join(PS_PLACEMENTS)}")
    search = _Search(_validate(batch_size, workers, ps, strategies, micro_batches),
                     PS_PLACEMENTS if search_layouts else (ps_placement,),
                     range(1, ps + 1) if search_layouts else (ps,), ps_placement, hierarchical,
                     HYBRID_BUCKET_MB if hybrid_bucket_mb is None else hybrid_bucket_mb,
                     BUCKET_SIZES_MB if hybrid_bucket_mb is None else ())
    profile = model_or_profile if isinstance(model_or_profile, ModelProfile) else profile_model(model_or_profile)
    if not isinstance(hardware, Hardware):
        hardware = load_hardware(hardware)
    candidates = compression_candidates(compression)
    plans = {spec: _analyze_one(profile, batch_size, workers, ps, hardware, strategies, spec, overlap, all_cuts,
                                timing, search, workers_per_host)
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


@dataclass(frozen=True)
class _Search:
    """What one analysis tries beyond strategies, cuts and codecs (module docstring)."""
    micro_batches: Sequence[int]   # m for the hybrid
    placements: Sequence[str]      # sync PS layouts
    shards: Sequence[int]          # S for the hybrid's head
    preferred: str = "dedicated"   # the layout a tie goes to
    hierarchical: Optional[bool] = False  # Horovod's all-reduce: flat, hierarchical, or None: both (``analyze``)
    bucket_mb: float = HYBRID_BUCKET_MB  # the hybrid's ring buckets (MiB) its cuts are priced with
    buckets: Sequence[float] = ()        # ring buckets tried for each unpipelined variant's cut (none: bucket_mb)


def hierarchical_applies(hardware: Hardware, workers: int, workers_per_host: Optional[int], compression) -> bool:
    """Where Horovod's hierarchical all-reduce is a different plan from one flat ring: several
    workers per host whose devices have a link of their own (NVLink, PCIe peer: NCCL's in-host
    steps; CPU hosts have none, and Horovod's Gloo ignores the setting), and gradients a ring can
    sum (int8 and top-k are all-gathered either way)."""
    if not hardware.intra_host_bandwidth or parse_compression(compression)[0] in ("int8", "topk"):
        return False
    return workers_on_each_host(workers, hardware, workers_per_host) > 1


def _analyze_one(profile, batch_size, workers, ps, hardware, strategies, compression, overlap, all_cuts,
                 timing=None, search: Optional[_Search] = None, workers_per_host: Optional[int] = None) -> Plan:
    search = search or _Search((1,), ("dedicated",), (ps,))
    common = dict(workers=workers, batch_size=batch_size, hardware=hardware, overlap=overlap,
                  compression=compression, timing=timing, workers_per_host=workers_per_host,
                  hybrid_bucket_mb=search.bucket_mb)
    if compression is not None:  # strategies not priced (nor implemented) with this codec sit it out
        kind = parse_compression(compression)[0]
        strategies = [s for s in strategies if kind in CODECS_OF.get(s, (kind,))]
    predictions, ps_layouts, horovod_variants = _unsplit(profile, strategies, ps, common, search)
    split_possible = profile.first_dense_cut() is not None
    cuts = candidate_cuts(profile, all_cuts)
    best_splits, by_cut, variants, by_bucket = [], {}, {}, {}
    for s in (s for s in SPLIT_STRATEGIES if s in strategies):
        for S in (search.shards if s in SHARDED_HEAD else (ps,)):
            usable = [c for c in cuts if S == 1 or s not in SHARDED_HEAD or profile.head_chain(c) is not None]
            for m in (search.micro_batches if s in PIPELINED else (1,)):
                by_cut[s, S, m] = {cut: predict(profile, s, cut=cut, ps=S, micro_batches=m, **common) for cut in usable}
                best = _pick_ralp(by_cut[s, S, m], profile.cut_points)
                if best is not None and s in PIPELINED and m == 1 and search.buckets:
                    # pipelined micro-batches ring once after the pipeline: buckets change nothing there
                    by_bucket[S] = {mb: predict(profile, s, cut=best.cut, ps=S, **{**common, "hybrid_bucket_mb": mb})
                                    for mb in search.buckets}
                    best = _pick_bucket(by_bucket[S])
                if best is not None and s in PIPELINED + SHARDED_HEAD:
                    variants[S, m] = best
                elif best is not None:
                    best_splits.append(best)
    buckets = {}  # the ring buckets weighed for the chosen hybrid variant
    if variants:
        hybrid = _pick_variant(variants)
        buckets = by_bucket.get(hybrid.ps, {}) if hybrid.micro_batches == 1 else {}
        best_splits.append(hybrid)
    for p in best_splits:
        predictions[p.strategy] = p
    best_split = _pick_split(best_splits)

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
    reason += (_variant_reason(predictions, variants, ps_layouts)
               + _bucket_reason(buckets, predictions.get("ralp-hybrid")) + _horovod_reason(horovod_variants))
    if cuts and not variants and any(s in strategies for s in SHARDED_HEAD):
        reason += f" The hybrid is not a candidate with {ps} PS tasks: {head_chain(profile, cuts[0])[1]}."
    return Plan(strategy=chosen.strategy, cut=chosen.cut if chosen.strategy in SPLIT_STRATEGIES else None,
                predictions=predictions, reason=reason, ralp_by_cut=by_cut.get(("ralp", ps, 1), {}),
                split_possible=split_possible, compression=compression, micro_batches=chosen.micro_batches,
                ps=chosen.ps, ps_placement=chosen.ps_placement, hybrid_variants=variants, ps_layouts=ps_layouts,
                horovod_variants=horovod_variants, hybrid_buckets=buckets)


def _unsplit(profile, strategies, ps, common, search: _Search):
    """The strategies that do not split, each in its best layout: sync PS in each placement
    searched, Horovod flat or hierarchical (``search.hierarchical``). Returns (predictions, sync
    PS per layout, Horovod per all-reduce where both were priced)."""
    predictions, ps_layouts, horovod_variants = {}, {}, {}
    for s in (s for s in strategies if s not in SPLIT_STRATEGIES):
        layouts = {pl: predict(profile, s, ps=ps, ps_placement=pl, **common)
                   for pl in (search.placements if s == "ps" else search.placements[:1])}
        predictions[s] = min(layouts.values(), key=lambda p: (p.step_time_s, p.ps_placement != search.preferred))
        if s == "ps":
            ps_layouts = layouts
        applies = s == "horovod" and search.hierarchical is not False and hierarchical_applies(
            common["hardware"], common["workers"], common["workers_per_host"], common["compression"])
        if applies or (s == "horovod" and search.hierarchical):  # searched, or asked for by the run
            hier = predict(profile, s, hierarchical=True, **common)
            horovod_variants = {"flat": predictions[s], "hierarchical": hier} if applies else {}
            if search.hierarchical or hier.step_time_s < predictions[s].step_time_s * (1 - MIN_VARIANT_GAIN):
                predictions[s] = hier
    return predictions, ps_layouts, horovod_variants


def _pick_split(splits) -> Optional[Prediction]:
    """The split to weigh against the unsplit strategies: the fastest, except that RALP's
    FC-on-PS stays unless the hybrid is at least MIN_VARIANT_GAIN faster than it (ties: fewer bytes)."""
    fastest = min(splits, key=lambda p: (p.step_time_s, p.worker_bytes), default=None)
    ralp = next((p for p in splits if p.strategy == "ralp"), None)
    if ralp is None or fastest is ralp or fastest.step_time_s < ralp.step_time_s * (1 - MIN_VARIANT_GAIN):
        return fastest
    return ralp


def _pick_variant(variants: Dict[Tuple[int, int], Prediction]) -> Prediction:
    """The (S, m) variant to run: only the plain one (fewest PS tasks, m = 1) and those at least
    MIN_VARIANT_GAIN faster than it qualify; of those within MIN_VARIANT_GAIN of the fastest, the
    one with the fewest PS tasks, then the fewest micro-batches (ties within 1e-9 included)."""
    plain = variants[min(variants)]
    eligible = [p for p in variants.values() if p is plain or p.step_time_s < plain.step_time_s * (1 - MIN_VARIANT_GAIN)]
    fastest = min(p.step_time_s for p in eligible)
    near = [p for p in eligible if p.step_time_s * (1 - MIN_VARIANT_GAIN) <= fastest * (1 + 1e-9)]
    return min(near, key=lambda p: (p.ps, p.micro_batches, p.step_time_s))


def _pick_bucket(by_bucket: Dict[float, Prediction]) -> Prediction:
    """The ring buckets to run: the fused ring (0 MiB, one ring) unless a bucket layout is
    MIN_VARIANT_GAIN faster; of those within MIN_VARIANT_GAIN of the fastest, the largest buckets
    (the fewest rings, each with a fixed cost the model leaves out)."""
    fused = by_bucket.get(0.0, by_bucket[max(by_bucket)])
    eligible = [p for p in by_bucket.values() if p is fused or p.step_time_s < fused.step_time_s * (1 - MIN_VARIANT_GAIN)]
    fastest = min(p.step_time_s for p in eligible)
    near = [p for p in eligible if p.step_time_s * (1 - MIN_VARIANT_GAIN) <= fastest * (1 + 1e-9)]
    return max(near, key=lambda p: (p is fused, p.hybrid_bucket_mb))


def _bucket_reason(by_bucket: Dict[float, Prediction], chosen: Optional[Prediction]) -> str:
    """The ring buckets the search weighed for the ``chosen`` hybrid (where they differ), and how a
    run asks for the chosen ones."""
    if chosen is None or len({round(p.step_time_s, 12) for p in by_bucket.values()}) < 2:
        return ""
    times = ", ".join(f"{_bucket(mb)} {_seconds(p.step_time_s)}" for mb, p in by_bucket.items())
    return (f" Hybrid's ring: {_bucket(chosen.hybrid_bucket_mb)} ({times}; buckets must be {MIN_VARIANT_GAIN:.0%} "
            f"faster than one fused ring; a run asks with --hybrid-bucket-mb {chosen.hybrid_bucket_mb:g}).")


def _bucket(mb: float) -> str:
    return "one fused ring" if mb == 0 else f"{mb:g} MiB buckets"


def describe(p: Prediction) -> str:
    """A strategy's label with the layout it was priced in (the PS layout, the hybrid's S and m)."""
    label = STRATEGY_LABELS[p.strategy]
    if p.strategy == "ps" and p.ps_placement == "colocated":
        return f"{label}, colocated"
    if p.hierarchical:
        return f"{label}, hierarchical"
    if p.strategy in SHARDED_HEAD and (p.ps > 1 or p.micro_batches > 1):
        return f"{label} ({_variant(p)})"
    return label


def _variant(p: Prediction) -> str:
    head = f"head over {p.ps} PS" if p.ps > 1 else "head on 1 PS"
    return head + (f", {p.micro_batches} micro-batches" if p.micro_batches > 1 else ", unpipelined")


def _horovod_reason(horovod_variants: Dict[str, Prediction]) -> str:
    """Horovod's two all-reduces weighed (where searched), and how a run asks for the other one."""
    if not horovod_variants:
        return ""
    flat, hier = horovod_variants["flat"], horovod_variants["hierarchical"]
    line = (f" Horovod: hierarchical all-reduce {_seconds(hier.step_time_s)} vs one flat ring "
            f"{_seconds(flat.step_time_s)}")
    if hier.step_time_s < flat.step_time_s * (1 - MIN_VARIANT_GAIN):
        return line + " (a run asks for it with --horovod-hierarchical --horovod-ops mpi; Horovod built with NCCL)."
    return line + f" (not {MIN_VARIANT_GAIN:.0%} faster: the flat ring)."


def _variant_reason(predictions, variants, ps_layouts) -> str:
    """The layouts and pipelining the search weighed, with their predicted step times."""
    parts = []
    hybrid = predictions.get("ralp-hybrid")
    if hybrid is not None and len(variants) > 1:
        plain = variants[min(variants)]
        fastest = min(variants.values(), key=lambda p: (p.step_time_s, p.ps, p.micro_batches))
        line = f" Hybrid: {_variant(hybrid)} at {_seconds(hybrid.step_time_s)}"
        if hybrid is not plain:
            line += f" vs {_seconds(plain.step_time_s)} {_variant(plain)}"
        if fastest is not hybrid:
            line += (f"; {_variant(fastest)} at {_seconds(fastest.step_time_s)} is not {MIN_VARIANT_GAIN:.0%} "
                     f"faster than {'that' if hybrid is plain else 'a simpler variant'}")
        parts.append(line + f" ({len(variants)} PS x micro-batch variants tried).")
    if len(ps_layouts) > 1:
        parts.append(" Sync PS: " + ", ".join(f"{_seconds(p.step_time_s)} {layout}"
                                              for layout, p in ps_layouts.items()) + ".")
    return "".join(parts)


def _kept_reason(chosen, predictions) -> str:
    """Why FC-on-PS runs though the hybrid is predicted (slightly) faster (``_pick_split``)."""
    hybrid = predictions.get("ralp-hybrid")
    if chosen.strategy != "ralp" or hybrid is None or hybrid.step_time_s >= chosen.step_time_s:
        return ""
    gain = 1 - hybrid.step_time_s / chosen.step_time_s
    return (f" {describe(hybrid)} is predicted only {gain:.0%} faster, under the {MIN_VARIANT_GAIN:.0%} it must gain "
            f"for its ring and tower replicas: {describe(chosen)} is kept.")


def _reason(profile, chosen, predictions, best_split, split_possible, split_requested) -> str:
    sync_ps = predictions.get("ps")
    versus = f" vs {_mb(sync_ps.worker_bytes)} for sync PS" if sync_ps else ""
    if chosen.strategy in SPLIT_STRATEGIES:
        others = sorted((p for s, p in predictions.items() if s != chosen.strategy), key=lambda p: p.step_time_s)
        times = " and ".join(f"{_seconds(p.step_time_s)} ({describe(p)})" for p in others)
        return (f"Split after {chosen.cut!r}: {describe(chosen)} moves {_mb(chosen.worker_bytes)}/worker/step"
                f"{versus}; "
                f"predicted {_seconds(chosen.step_time_s)}" + (f" vs {times}" if times else "") +
                f". Bottleneck: {chosen.bottleneck}." + _kept_reason(chosen, predictions))
    best = f"{describe(chosen)} is predicted fastest at {_seconds(chosen.step_time_s)} per step " \
           f"(bottleneck: {chosen.bottleneck})."
    if not split_requested:
        return best
    if not split_possible:
        return f"No split possible: {profile.name} has no dense layer to place on the PS. " + best
    return (f"Do not split: the best split ({describe(best_split)} after {best_split.cut!r}) moves "
            f"{_mb(best_split.worker_bytes)}/worker/step{versus} and is predicted at "
            f"{_seconds(best_split.step_time_s)}; " + best)
