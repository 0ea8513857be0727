"""The cost model's extrapolation to 1,024 workers, drawn through the measured points.

Why: the paper's scale (and any user's) is far beyond the 2-8 emulated hosts one machine holds,
so the cost model must carry the claims there; it is only worth that trust where it follows the
points we did measure. So for every (model, links, strategy) series measured at two or more
worker counts, this module predicts the step at 2, 4, ... 1,024 workers (ralp.cost_model.predict,
on the preset the rows were scaled to, with the rows' batch, cut, layout and micro-batches) and
compares the predicted gain between consecutive measured worker counts with the measured gain:
within ``SLOPE_TOLERANCE`` (±20%) is "ok".

Units: the emulated links were slowed by the factor between this host's compute (under its CPU
cap) and the preset's (bench/driver/scaling.py), so a step here lasts 1/factor of the preset's and
images/sec here x preset bandwidth / emulated link rate is the preset's images/sec
(``preset_rate``). That also puts worker counts run under different CPU caps on one scale. The
predicted curve is anchored to the measured point at the fewest workers (scaled to pass through
it): the check is about the slope, which the anchor leaves alone.
Rows on links not scaled to a preset are not extrapolated: their compute is this machine's, and
the cost model would need this machine's calibration to price it.
"""
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

from bench.core.errors import UserError
from bench.core.strategy_specs import SPECS
from bench.report.format import fmt_rate
from bench.store.results import is_missing
from ralp.cost_model import SPLIT_STRATEGIES, predict
from ralp.hardware import PRESETS

SLOPE_TOLERANCE = 0.20
EXTRAPOLATE_TO = 1024
WORKER_COUNTS = tuple(2 ** k for k in range(1, 11))  # 2 .. 1,024


@dataclass
class Series:
    model: str
    setting: str
    name: str                                # strategy as the report names it (ps-colocated ...)
    measured: List[Tuple[int, float]]        # (workers, preset images/sec)
    predicted: Dict[int, float] = field(default_factory=dict)  # workers -> anchored images/sec
    segments: List[Tuple[int, int, float, float]] = field(default_factory=list)  # (w0, w1, measured, predicted gain)
    note: str = ""

    @property
    def ok(self) -> Optional[bool]:
        if not self.segments:
            return None
        return all(abs(p / m - 1) <= SLOPE_TOLERANCE for *_, m, p in self.segments)


def preset_rate(row) -> Optional[float]:
    """Images/sec on the preset's cluster for a row measured on links scaled to it (module docstring)."""
    preset, link, rate = row.get("scaled_to"), row.get("link_bps"), row.get("images_per_sec")
    if is_missing(preset) or preset not in PRESETS or is_missing(link) or not link or is_missing(rate):
        return None
    return rate * PRESETS[preset].worker_bandwidth / link


def priced(name: str) -> Tuple[Optional[str], str]:
    """(cost function, sync-PS layout) of a strategy as the report names it."""
    if name == "ps-colocated":
        return "ps", "colocated"
    spec = SPECS.get(name)
    return (spec.priced_as if spec and not spec.one_batch_per_step else None), "dedicated"


def extrapolate(grid, profile_for: Callable) -> List[Series]:
    """Every uncompressed, priced series of ``grid`` (bench/report/paper_claims.py) measured at two or more
    worker counts; ``profile_for(model)`` gives the model's ralp.profile.ModelProfile (or raises)."""
    out = []
    for model, setting in grid.settings():
        names = dict.fromkeys(n for c, rows in grid.cells.items() if (c.model, c.setting) == (model, setting)
                              for n in rows)
        for name in names:
            strategy, placement = priced(name)
            points = grid.series(model, setting, name)
            if strategy is None or len(points) < 2:
                continue
            series = Series(model, setting, name, [(w, preset_rate(r)) for w, r in points])
            if any(rate is None for _, rate in series.measured):
                series.note = "links not scaled to a preset: not extrapolated"
            else:
                _predict_series(series, points[0][1], strategy, placement, profile_for)
            out.append(series)
    return out


def _predict_series(series: Series, row, strategy, placement, profile_for):
    try:
        profile = profile_for(series.model)
    except Exception as exc:  # noqa: BLE001 - a model we cannot build is a note in its row, not a crash
        series.note = f"no profile of {series.model}: {exc}"
        return
    cut = row.get("cut_layer") if strategy in SPLIT_STRATEGIES else None
    if strategy in SPLIT_STRATEGIES and is_missing(cut):
        cut = profile.first_dense_cut()
    micro = row.get("micro_batches")
    micro = int(micro) if strategy == "ralp-hybrid" and not is_missing(micro) else 1
    measured_at = [w for w, _ in series.measured]
    raw = {}
    try:
        for workers in sorted(set(WORKER_COUNTS) | set(measured_at)):
            raw[workers] = predict(profile, strategy, workers=workers, batch_size=int(row["batch_size"]),
                                   hardware=PRESETS[row["scaled_to"]], cut=cut, ps_placement=placement,
                                   micro_batches=micro).images_per_s
    except UserError as exc:  # a configuration the cost model cannot price
        series.note = f"not priced: {exc}"
        return
    first_w, first_rate = series.measured[0]
    scale = first_rate / raw[first_w]
    series.predicted = {w: v * scale for w, v in raw.items()}
    for (w0, m0), (w1, m1) in zip(series.measured, series.measured[1:]):
        series.segments.append((w0, w1, m1 / m0, raw[w1] / raw[w0]))


def efficiency_at(series: Series, workers: int = EXTRAPOLATE_TO) -> Optional[float]:
    """Per-worker throughput at ``workers`` over that at the fewest measured workers (anchored curve)."""
    if workers not in series.predicted or not series.measured:
        return None
    w0, r0 = series.measured[0]
    return (series.predicted[workers] / workers) / (r0 / w0)


def slope_rows(series_list: List[Series]):
    """Table rows: model, links, strategy, gains measured vs predicted, verdict, 1,024-worker figures."""
    rows = []
    for s in series_list:
        gains = "; ".join(f"{w0}→{w1}: {m:.2f}× measured, {p:.2f}× predicted ({round(p / m - 1, 2) + 0.0:+.0%})"
                          for w0, w1, m, p in s.segments)
        verdict = s.note or ("ok" if s.ok else f"off by more than ±{SLOPE_TOLERANCE:.0%} ⚠")
        at = s.predicted.get(EXTRAPOLATE_TO)
        eff = efficiency_at(s)
        rows.append([s.model, s.setting, s.name, gains or "—", verdict,
                     "—" if at is None else fmt_rate(at), _share(eff)])
    return rows


def _share(value) -> str:
    if value is None:
        return "—"
    return f"{value:.0%}" if value >= 0.1 else f"{value:.1%}" if value >= 0.001 else "<0.1%"
