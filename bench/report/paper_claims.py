"""The RALP paper's claims, each judged from one run's rows: the claim, the paper's figure, ours, a verdict.

Why a module of its own: a verdict is only worth printing if the rule behind it is written down
and tested. The paper (Park et al., arXiv 1901.05803; /work/shared/notes/anchors.md) claims
training time "up to 13x" shorter than TensorFlow's PS, better scaling than Horovod because
RALP's traffic does not grow with the model, no gain where the FC layers are small (and the
analyzer not splitting there), compatibility with fp16 and top-k, and no loss of accuracy.
Each claim gets one of four verdicts:
- "holds": measured and as large as the paper says;
- "partly holds": measured, in the paper's direction but smaller than its figure, or true in
  some of the measured cells and not in others (3x over PS is not 13x);
- "does not hold": measured, and not in the paper's direction;
- "not measured": the run has no rows that could answer it (the row says which are missing).
Speedups are ratios of median step times with their 95% interval over launches (bench/core/stats.py:
a two-level bootstrap, repeats then their steps; with one repeat it covers that launch's steps
only), as in the report's throughput table; "faster" means the interval lies above 1.0.
"""
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

from bench.core.stats import speedup_ci, step_count
from bench.core.strategy_specs import SPECS, rings_tower
from bench.report.summary import PS_LAYOUTS
from bench.report.tables import fraction_of_bound, shown_rate
from bench.store.results import is_missing

PAPER_SPEEDUP_OVER_PS = 13.0
SMALL_FC_MODELS = ("resnet50", "inception3")  # the paper's "FC layers are small" networks
NO_GAIN = 0.05  # a split within 5% of the best unsplit strategy (or not significantly faster) gains nothing
SPLITS = tuple(name for name, spec in SPECS.items() if spec.splits)
UNSPLIT = PS_LAYOUTS + ("horovod",)
HOLDS, PARTLY, FAILS, NOT_MEASURED = "holds", "partly holds", "does not hold", "not measured"


@dataclass(frozen=True)
class Cell:
    """One point of the grid: a model at a worker count on one link setting."""
    model: str
    workers: int
    setting: str  # "scaled to v100-10gbe", "1 Gbit/s", plus any other key that varies

    @property
    def label(self) -> str:
        return f"{self.model}, {self.workers} workers, {self.setting}"


@dataclass
class Claim:
    key: str
    claim: str
    paper: str
    ours: str = ""
    verdict: str = NOT_MEASURED


@dataclass
class Grid:
    """The run's ok rows by cell and by name (strategy, or 'strategy codec' for a codec row), and
    the failed ones (so a claim can say a row failed rather than that it was never run)."""
    cells: Dict[Cell, Dict[str, dict]] = field(default_factory=dict)
    failed: Dict[Cell, Dict[str, dict]] = field(default_factory=dict)

    def series(self, model: str, setting: str, name: str) -> List[Tuple[int, dict]]:
        """(workers, row) of one name across worker counts, fewest workers first."""
        return sorted(((c.workers, rows[name]) for c, rows in self.cells.items()
                       if c.model == model and c.setting == setting and name in rows), key=lambda p: p[0])

    def settings(self) -> List[Tuple[str, str]]:
        return list(dict.fromkeys((c.model, c.setting) for c in self.cells))


def row_name(row) -> str:
    """The strategy, its codec, and the hybrid's pipeline and buckets where it has them
    (``ralp-hybrid fp16 4 micro-batches (4 MiB buckets)``); a hybrid without buckets is the fused one."""
    name = str(row["strategy"]) if _codec_free(row) else f"{row['strategy']} {row['compression']}"
    micro = row.get("micro_batches")
    name = name if is_missing(micro) or int(micro) <= 1 else f"{name} {int(micro)} micro-batches"
    buckets = row.get("hybrid_bucket_mb")  # recorded on every row; only a strategy that rings its tower uses it
    if not rings_tower(row.get("strategy")) or is_missing(buckets) or not float(buckets) > 0:
        return name
    return f"{name} ({float(buckets):g} MiB buckets)"


def _codec_free(row) -> bool:
    codec = row.get("compression")
    return is_missing(codec) or codec in ("none", "auto")


# Which row of a cell stands for RALP in claims (a) and (b): the paper's placement itself, or (issue 35)
# the fastest plan of the RALP family, so that a verdict on the method does not rest on one plan's slack.
Subject = Callable[[Dict[str, dict]], Optional[str]]


def paper_ralp(rows: Dict[str, dict]) -> Optional[str]:
    """The paper's placement: the FC layers on the PS, the conv tower synchronised through it."""
    return "ralp" if "ralp" in rows else None


def ralp_family_best(rows: Dict[str, dict]) -> Optional[str]:
    """The fastest plan that splits the model, without a codec (ralp; the hybrid fused, bucketed or
    pipelined): the baselines it is held against run without one too, so the comparison stays equal."""
    return best_of(rows, [n for n, r in rows.items() if r.get("strategy") in SPLITS and _codec_free(r)])


def build_grid(summary, setting_of) -> Grid:
    """``setting_of(row)`` names a row's link setting (bench/report/paper.py)."""
    grid = Grid()
    for _, row in summary.iterrows():
        row = row.to_dict()
        cell = Cell(str(row["model"]), int(row["workers"]), setting_of(row))
        ok = row["status"] == "ok" and not is_missing(row.get("images_per_sec"))
        (grid.cells if ok else grid.failed).setdefault(cell, {})[row_name(row)] = row
    return grid


def speedup(row, base) -> Tuple[float, float, float]:
    """(ratio, low, high): median step time of ``base`` over that of ``row`` with the 95% interval
    over launches, from the rows' timed steps (one list per launch); images/sec ratio with no
    interval (low = high) when a side kept fewer than 3 steps. Both rows train the same global
    batch per step (same cell)."""
    mine, theirs = row.get("step_times"), base.get("step_times")
    if isinstance(mine, list) and isinstance(theirs, list) and min(step_count(mine), step_count(theirs)) >= 3:
        return speedup_ci(theirs, mine)
    ratio = row["images_per_sec"] / base["images_per_sec"]
    return ratio, ratio, ratio


def faster(ratio_ci) -> bool:
    return ratio_ci[1] > 1.0


def best_of(rows: Dict[str, dict], names) -> Optional[str]:
    present = [n for n in names if n in rows]
    return max(present, key=lambda n: shown_rate(rows[n])) if present else None


def _fmt(x: float) -> str:
    return f"{x:.1f}×" if x >= 1.95 else f"{x:.2f}×"


def _missing(grid: Grid, names, models=None, where="") -> str:
    """Why a claim has nothing to go on: which of the rows it needs failed or were never run."""
    failed = sorted({f"{n} ({c.label})" for c, rows in grid.failed.items() for n in rows
                     if n in names and (models is None or c.model in models)})
    text = f"no cell with {' and '.join(names)} both ok{where}"
    return text + (f"; failed: {', '.join(failed[:4])}" + (" …" if len(failed) > 4 else "") if failed else "")


def claim_speedup_over_ps(grid: Grid, subject: Subject = paper_ralp) -> Claim:
    """(a) Up to 13x over TensorFlow's PS: RALP (``subject`` picks its row per cell) against the
    faster sync-PS layout measured in each cell."""
    claim = Claim("a", "Training time reduced against TensorFlow's parameter server",
                  f"up to {PAPER_SPEEDUP_OVER_PS:g}× (TF PS)")
    found = []
    for cell, rows in grid.cells.items():
        base, name = best_of(rows, PS_LAYOUTS), subject(rows)
        if name and base:
            found.append((speedup(rows[name], rows[base]), cell, base, name))
    if not found:
        claim.ours = _missing(grid, ("ralp", "ps"))
        return claim
    (top, cell, base, name) = max(found, key=lambda f: f[0][0])
    wins = sum(faster(f[0]) for f in found)
    claim.ours = (f"up to {_fmt(top[0])} over {base} ({cell.label}: {name} "
                  f"{grid.cells[cell][name]['images_per_sec']:.3g} vs "
                  f"{grid.cells[cell][base]['images_per_sec']:.3g} img/s); faster in {wins} of {len(found)} cells "
                  f"({_fmt(min(f[0][0] for f in found))}–{_fmt(top[0])}); paper: up to {PAPER_SPEEDUP_OVER_PS:g}×")
    hybrid = [speedup(rows["ralp-hybrid"], rows[best_of(rows, PS_LAYOUTS)])[0] for rows in grid.cells.values()
              if "ralp-hybrid" in rows and best_of(rows, PS_LAYOUTS)]
    if hybrid and subject is paper_ralp:
        claim.ours += f"; ralp-hybrid (not in the paper): up to {_fmt(max(hybrid))}"
    claim.verdict = (HOLDS if top[0] >= PAPER_SPEEDUP_OVER_PS else PARTLY if wins else FAILS)
    return claim


def claim_scaling_over_horovod(grid: Grid, subject: Subject = paper_ralp) -> Claim:
    """(b) Better scaling than Horovod: on the FC-heavy models, RALP's lead over Horovod grows from
    the fewest to the most workers measured, and RALP moves fewer bytes per worker. ``subject``
    picks RALP's row per cell (the plan may differ between worker counts; the text names it)."""
    claim = Claim("b", "Scales better than Horovod: RALP's traffic does not grow with the model's size",
                  "better scaling than Horovod (no figure in the summaries)")
    judged, parts = [], []
    for model, setting in grid.settings():
        if model in SMALL_FC_MODELS:
            continue
        pairs = [(w, speedup(rows[name], rows["horovod"]), name) for w, rows, name in _subject_series(
            grid, model, setting, subject) if "horovod" in rows]
        if len(pairs) < 2:
            continue
        (w0, first, n0), (w1, last, n1) = pairs[0], pairs[-1]
        grows = last[0] > first[0] and faster(last)
        judged.append(grows)
        bytes_text = _bytes_ratio(grid, model, setting, w1, n1)
        label = "ralp" if subject is paper_ralp else "best RALP plan"
        plans = "" if subject is paper_ralp else f" ({n0} → {n1})"
        parts.append(f"{model} ({setting}): {label}/horovod {_fmt(first[0])} at {w0} → {_fmt(last[0])} at {w1} "
                     f"workers{plans}{bytes_text}{_of_bound(grid, model, setting, w1, n1)}")
    if not judged:
        claim.ours = _missing(grid, ("ralp", "horovod"), where=" at two or more worker counts (FC-heavy models)")
        return claim
    claim.ours = "; ".join(parts)
    claim.verdict = HOLDS if all(judged) else PARTLY if any(judged) else FAILS
    return claim


def _subject_series(grid, model, setting, subject):
    """(workers, the cell's rows, the subject's name) across worker counts, fewest first, where the cell has one."""
    cells = sorted(((c.workers, rows, subject(rows)) for c, rows in grid.cells.items()
                    if (c.model, c.setting) == (model, setting)), key=lambda cell: cell[0])
    return [cell for cell in cells if cell[2]]


def _of_bound(grid, model, setting, workers, name) -> str:
    """How close RALP's row and horovod came to their plans' bounds in a cell (bench/report/tables.py
    ``fraction_of_bound``): a verdict on the method should not rest on one implementation's slack,
    so the reader sees it beside the speedup; empty where neither row has a bound."""
    rows = grid.cells.get(Cell(model, workers, setting), {})
    found = [(n, fraction_of_bound(rows[n])) for n in (name, "horovod") if n in rows]
    shown = [f"{n} {f:.2f}" for n, f in found if f is not None]
    return f" (fraction of bound: {', '.join(shown)})" if shown else ""


def _bytes_ratio(grid, model, setting, workers, name) -> str:
    rows = grid.cells.get(Cell(model, workers, setting), {})
    mine, theirs = (rows.get(n, {}).get("bytes_worker_measured") for n in (name, "horovod"))
    if is_missing(mine) or is_missing(theirs) or not theirs:
        return ""
    return f" (bytes per worker {mine / 1e6:.3g} vs {theirs / 1e6:.3g} MB)"


def claim_no_gain_small_fc(grid: Grid) -> Claim:
    """(c) No gain on ResNet-50 / Inception-v3, and the analyzer (auto) does not split them."""
    claim = Claim("c", "No gain where the FC layers are small (ResNet-50, Inception-v3); the analyzer does not split",
                  "no gain; the analyzer avoids the split")
    gains, picks = [], []
    for cell, rows in grid.cells.items():
        if cell.model not in SMALL_FC_MODELS:
            continue
        base = best_of(rows, UNSPLIT)
        if "ralp" in rows and base:
            gains.append(speedup(rows["ralp"], rows[base]))
        if "auto" in rows:
            picks.append(str(rows["auto"].get("plan") or "?").split("+")[0])
    if not gains and not picks:
        claim.ours = _missing(grid, ("ralp", "horovod"), SMALL_FC_MODELS, f" on {' or '.join(SMALL_FC_MODELS)}")
        return claim
    parts, verdicts = [], []
    if gains:
        none = [not (faster(g) and g[0] > 1 + NO_GAIN) for g in gains]
        verdicts.append(all(none))
        parts.append(f"ralp over the best of sync PS/Horovod: {_fmt(min(g[0] for g in gains))}–"
                     f"{_fmt(max(g[0] for g in gains))} ({sum(none)} of {len(gains)} cells without a gain)")
    if picks:
        unsplit = [p not in SPLITS for p in picks]
        verdicts.append(all(unsplit))
        ran = ", ".join(f"{p} {picks.count(p)}×" for p in dict.fromkeys(picks))
        parts.append(f"auto ran {ran} (no split in {sum(unsplit)} of {len(picks)} cells)")
    else:
        parts.append("auto not measured")
    claim.ours = "; ".join(parts)
    claim.verdict = (HOLDS if all(verdicts) and len(verdicts) == 2 else PARTLY if any(verdicts) else FAILS)
    return claim


def claim_codecs(grid: Grid) -> Claim:
    """(d) Compatible with quantization and sparsification: RALP with each codec runs, and moves
    fewer bytes; its speed against RALP without a codec is reported, not judged (the paper claims
    compatibility, not a speedup)."""
    claim = Claim("d", "Compatible with quantization (fp16) and sparsification (top-k)", "compatible (no figure)")
    codec_names = sorted({n for rows in list(grid.cells.values()) + list(grid.failed.values()) for n in rows
                          if n.startswith("ralp ")})
    if not codec_names:
        claim.ours = "no ralp row with a codec in this run"
        return claim
    parts, ok = [], []
    for name in codec_names:
        failed = [c for c, rows in grid.failed.items() if name in rows]
        pairs = [(c, rows[name], rows["ralp"]) for c, rows in grid.cells.items() if name in rows and "ralp" in rows]
        fewer = [r["bytes_worker_measured"] < b["bytes_worker_measured"] for _, r, b in pairs
                 if not is_missing(r.get("bytes_worker_measured")) and not is_missing(b.get("bytes_worker_measured"))]
        ok.append(bool(pairs) and not failed and all(fewer))
        found = [f"{_fmt(speedup(r, b)[0])} speed, {_ratio(r, b, 'bytes_worker_measured')} worker bytes, "
                 f"{_ratio(r, b, 'bytes_ps_measured')} PS bytes ({c.label})" for c, r, b in pairs]
        found += [f"failed in {c.label}" for c in failed]
        parts.append(f"{name.split(' ', 1)[1]}: " + (", ".join(found) or "no uncompressed ralp row to compare with"))
    claim.ours = "; ".join(parts) + " (each against ralp without a codec)"
    claim.verdict = HOLDS if all(ok) else PARTLY if any(ok) else FAILS
    return claim


def _ratio(row, base, column) -> str:
    a, b = row.get(column), base.get(column)
    return "—" if is_missing(a) or is_missing(b) or not b else f"{a / b:.2f}×"


def judge(grid: Grid) -> List[Claim]:
    """Claims (a)-(d), from the paper's grid; (e), accuracy, comes from a run on real data
    (bench/report/paper_accuracy.py)."""
    return [claim_speedup_over_ps(grid), claim_scaling_over_horovod(grid), claim_no_gain_small_fc(grid),
            claim_codecs(grid)]
