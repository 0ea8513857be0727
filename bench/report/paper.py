"""results/paper.md: one committed run held against the RALP paper, claim by claim.

Why a document of its own rather than another table in the report: the report says what a run
measured; this says what it means for the paper's claims (bench/report/paper_claims.py decides each
verdict, by rules written there), with the evidence beside it: the report's own speedup,
scaling, auto, prediction and fraction-of-bound tables (bench/report/tables.py, reused as they are, so
the numbers cannot disagree with the report's), bytes per step against workers, and the cost model's
extrapolation to 1,024 workers through the measured points (bench/report/paper_extrapolate.py).
What the run lacks (a model, a worker count, a failed row) is said where it would have been,
never an error: a sweep of this size is run in chunks and may be published part-way.
"""
from pathlib import Path

from bench.core.strategy_specs import SPECS
from bench.driver.planning import model_profile
from bench.models.sources import get_spec
from bench.report.format import Report, Table, fmt_bytes, fmt_key, fmt_rate, to_markdown
from bench.report.paper_accuracy import accuracy_table, claim_accuracy
from bench.report.paper_claims import (FAILS, HOLDS, NOT_MEASURED, PARTLY, UNSPLIT, best_of, build_grid,
                                       claim_scaling_over_horovod, claim_speedup_over_ps, judge, ralp_family_best,
                                       speedup)
from bench.report.paper_extrapolate import EXTRAPOLATE_TO, SLOPE_TOLERANCE, extrapolate, preset_rate, slope_rows
from bench.report.summary import config_keys, display_strategies, summarize, with_bounds
from bench.report.tables import (ONE_LAUNCH, auto_table, bound_table, failure_table, fraction_of_bound, health_table,
                                 prediction_table, scaling_table, shown_rate, throughput_table)
from bench.store.results import coerce_frame, is_missing

PAPER_MODELS = ("alexnet", "vgg16", "resnet50", "inception3")
PAPER_WORKERS = (2, 4, 8)
# Carried through the summary so each row knows its links, batch and layout (not shown as columns).
ROW_KEYS = ("batch_size", "compression", "link_bps", "ps_link_bps", "scaled_to", "cpus_per_host", "micro_batches",
            "hybrid_bucket_mb")
LINK_KEYS = ("link_bps", "ps_link_bps", "scaled_to", "cpus_per_host")
NAME_KEYS = ("compression", "micro_batches", "hybrid_bucket_mb")  # in the row's name (paper_claims.row_name)


def setting_namer(keys):
    """A row's link setting as cells and series name it: its preset ('scaled to v100-10gbe') or
    its link rate, plus any other configuration key that varies in the run."""
    from bench.report.plots import _link_label  # lazy: matplotlib loads only where a figure is drawn

    others = [k for k in keys if k not in LINK_KEYS + NAME_KEYS and k != "run_id"]

    def setting_of(row):
        label = _link_label(row, ("link_bps", "ps_link_bps", "scaled_to")) or "links not recorded"
        return ", ".join([label] + [f"{k}={fmt_key(k, row.get(k))}" for k in others])
    return setting_of


def _grid(df):
    """(rows with bounds and display names, config keys, their summary with ROW_KEYS, the grid) of one run's
    or several runs' rows."""
    df = display_strategies(with_bounds(coerce_frame(df)))
    keys = config_keys(df, include_run=False)
    rows = summarize(df, keys + [k for k in ROW_KEYS if k not in keys])
    return df, keys, rows, build_grid(rows, setting_namer(keys))


def build(df, run_id, accuracy=(None, None), profile_for=None, figure_prefix="paper", unfinished=False,
          plans=((), None, ())):
    """The document for ``df`` (one run's rows) as (Report, figures to draw: [(kind, args)]).
    ``profile_for(model)`` returns a ralp.profile.ModelProfile (default: build the zoo model);
    ``unfinished``: the rows are an open sweep's journal, and the first line says so; ``accuracy``:
    (run id, rows) of the run on real data that answers claim (e) (bench/report/paper_accuracy.py);
    ``plans``: (run ids, rows, the unfinished ones) of later runs with plans this run predates (issue 35's
    bound sweeps), on which claims (a) and (b) are judged again, side by side with this run's verdicts."""
    df, keys, rows, grid = _grid(df)
    summary = summarize(df, keys)
    claims = judge(grid) + [claim_accuracy(*accuracy)]
    series = extrapolate(grid, profile_for or _zoo_profile)
    ok, noisy = int((df["status"] == "ok").sum()), int((df["status"] == "noisy").sum())
    intro = [f"**Unfinished run.** `{run_id}` is still being measured: these are the {len(df)} configurations "
             f"journaled so far (`results/pending/{run_id}.jsonl`); `ralp-bench sweep sweeps/paper.toml --resume "
             f"{run_id}` measures the rest, and this document is regenerated from the stored run when it is done. "
             "Claims and cells without rows say 'not measured'.", ""] if unfinished else []
    intro += [f"Run `{run_id}`: {len(df)} rows, {ok} ok, {len(df) - ok - noisy} failed"
             + (f", {noisy} measured again under CPU steal" if noisy else "") + ". Generated by "
             f"`ralp-bench paper --run {run_id}"
             + (f" --accuracy-run {accuracy[0]}" if accuracy[0] else "")
             + "".join(f" --plans-run {p}" for p in plans[0])
             + "`; the paper's grid is `sweeps/paper.toml`"
             + (", claim (e)'s is `sweeps/paper-accuracy.toml`." if accuracy[0] else "."), "",
             "Verdicts: **holds** (measured, as large as the paper says); **partly holds** (measured, in the "
             "paper's direction but smaller, or in some cells only); **does not hold**; **not measured** (the "
             "row says what is missing). Speedups are ratios of median step times; 'faster' means the 95% "
             "interval over launches (repeats; bench/core/stats.py) lies above 1.0." + _one_launch_caveat(rows), ""]
    batches = df.dropna(subset=["batch_size"]).groupby("model", sort=False)["batch_size"].first()
    if len(batches):
        intro += ["Batch per worker: " + ", ".join(f"{m} {int(b)}" for m, b in batches.items()) + ". Batches "
                     "smaller than the paper's (32-128 per GPU) make communication a larger share of each step, "
                     "which favours the strategies that move fewer bytes (ralp, ralp-hybrid): read the speedups "
                     "as those of that regime.", ""]
    if df["scaled_to"].notna().any():
        intro.append("Rows with `scaled_to` ran on emulated links slowed so that this machine's compute-to-network "
                     "ratio (under each host's CPU cap) matches that preset: their speedups stand for the preset's "
                     "cluster. \"Preset images/sec\" = images/sec here × the preset's link rate / the emulated "
                     "rate, which puts worker counts run under different CPU caps on one scale.")
    tables = [Table("The paper's claims", ["", "claim", "paper", "ours", "verdict"],
                    [[c.key, c.claim, c.paper, c.ours, f"**{c.verdict}**"] for c in claims],
                    [f"{sum(c.verdict == HOLDS for c in claims)} hold, {sum(c.verdict == PARTLY for c in claims)} "
                     f"partly hold, {sum(c.verdict == FAILS for c in claims)} do not hold, "
                     f"{sum(c.verdict == NOT_MEASURED for c in claims)} not measured."]),
              _coverage(grid)] + _with_new_plans(claims, *plans)
    plain = summary[~summary["strategy"].map(lambda s: s in SPECS and SPECS[s].one_batch_per_step)]
    tables += [throughput_table(summary, keys), _bytes_table(grid), _scaling(summary, keys, grid),
               auto_table(plain, keys), _extrapolation_table(series), prediction_table(summary, keys),
               bound_table(summary, keys), accuracy_table(*accuracy), health_table(summary, keys),
               failure_table(summary, keys)]
    report = Report("RALP's claims at the paper's scale", intro, [t for t in tables if t])
    setting = _main_setting(grid)
    figures = [("bytes", (grid, setting), f"{figure_prefix}-bytes.png",
                f"Bytes per worker per step against workers ({setting})."),
               ("extrapolation", (series,), f"{figure_prefix}-extrapolation.png",
                f"Cost model to {EXTRAPOLATE_TO:,} workers through the measured points.")]
    return report, figures


def _with_new_plans(claims, run_ids, rows, unfinished=()):
    """Claims (a) and (b) judged again on later runs with the RALP family's best plan per cell
    (paper_claims.ralp_family_best) standing for RALP, beside this run's verdicts; then that plan
    per cell against the fused hybrid this run had and against the best baseline. Nothing without
    such runs."""
    if not run_ids:
        return []
    grid = _grid(rows)[-1]
    runs = ", ".join(f"`{r}`" + (" (unfinished: the rows journaled so far)" if r in unfinished else "")
                     for r in run_ids)
    again = {c.key: c for c in (claim_speedup_over_ps(grid, ralp_family_best),
                                claim_scaling_over_horovod(grid, ralp_family_best))}
    side = Table(f"Claims (a) and (b) with the plans added since (runs {runs})",
                 ["", "claim", "this run: ralp", "verdict", "later runs: the RALP family's best plan", "verdict"],
                 [[c.key, c.claim, c.ours, f"**{c.verdict}**", again[c.key].ours, f"**{again[c.key].verdict}**"]
                  for c in claims if c.key in again],
                 ["The same rules (bench/report/paper_claims.py) on later runs, with RALP's row in each cell the "
                  "fastest codec-free plan that splits the model (ralp, the hybrid fused or with its gradient "
                  "buckets overlapping the backward pass) rather than the paper's placement alone: a verdict on the "
                  "method should not rest on one plan. Their cells are not this run's (other models or worker "
                  "counts, their own calibration), so the two columns are side by side, not merged."])
    return [side, _best_plan_table(grid)]


def _best_plan_table(grid):
    """Per cell of the later runs: the RALP family's best plan, its speedup over the fused hybrid
    (today's before issue 35) and over the best baseline, and how close it came to its bound."""
    body = []
    for cell in sorted(grid.cells, key=lambda c: (c.model, c.setting, c.workers)):
        rows = grid.cells[cell]
        name = ralp_family_best(rows)
        if not name:
            continue
        base = best_of(rows, UNSPLIT)
        fraction = fraction_of_bound(rows[name])
        body.append([cell.model, str(cell.workers), cell.setting, name, f"{shown_rate(rows[name]):.3g}",
                     _ratio_text(rows, name, "ralp-hybrid"), _ratio_text(rows, name, base),
                     "—" if fraction is None else f"{fraction:.2f}"])
    return Table("The RALP family's best plan per cell (later runs)",
                 ["model", "workers", "links", "best plan", "img/s", "over the fused hybrid", "over the best baseline",
                  "fraction of bound"], body,
                 ["Speedups are ratios of median step times with their 95% interval over launches. The best baseline "
                  "is the faster of tuned Horovod and the sync-PS layouts the run measured (— where it measured none)."])


def _ratio_text(rows, name, base):
    if not base or base not in rows:
        return "—"
    if base == name:
        return "(itself)"
    ratio, low, high = speedup(rows[name], rows[base])
    return f"{ratio:.2f}× [{low:.2f}–{high:.2f}] vs {base}"


def _one_launch_caveat(rows):
    """A sentence when some cells were measured in one launch: their intervals, and the verdicts
    resting on them, leave out the spread between launches."""
    timed = rows[(rows["status"] == "ok") & rows["step_times"].notna()] if "step_times" in rows else rows.iloc[:0]
    single = int((timed["repeats"] == 1).sum())
    if not single:
        return ""
    return (f" {single} of {len(timed)} rows with step times were measured in one launch: their intervals "
            f"({ONE_LAUNCH} in the throughput table) cover that launch's steps only, not the spread between "
            "launches, so a 'faster' there can be one launch's luck.")


def write(df, run_id, out_path, accuracy=(None, None), profile_for=None, unfinished=False, plans=((), None, ())):
    """Write the Markdown to ``out_path`` and its PNGs beside it; return the text."""
    from bench.report import paper_plots  # lazy: matplotlib loads only where a figure is drawn

    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    report, figures = build(df, run_id, accuracy, profile_for, figure_prefix=out.stem, unfinished=unfinished,
                            plans=plans)
    draw = {"bytes": paper_plots.bytes_plot, "extrapolation": paper_plots.extrapolation_plot}
    for kind, args, name, caption in figures:
        path = draw[kind](*args, out.parent / name)
        if path:
            report.plots.append((name, caption))
        else:
            (out.parent / name).unlink(missing_ok=True)  # no stale figure from an earlier run
    text = to_markdown(report)
    out.write_text(text, encoding="utf-8")
    return text


def _zoo_profile(model):
    return model_profile(get_spec(model))


def _main_setting(grid):
    settings = [c.setting for c in grid.cells]
    return max(dict.fromkeys(settings), key=settings.count) if settings else ""


def _coverage(grid):
    """What ran, per model and worker count: the paper's four models at 2, 4 and 8 workers always
    appear, so a model or worker count the run lacks reads as 'not run'."""
    models = list(PAPER_MODELS) + sorted({c.model for c in grid.cells} - set(PAPER_MODELS))
    rows = []
    for model in models:
        counts = sorted(set(PAPER_WORKERS) | {c.workers for c in list(grid.cells) + list(grid.failed)
                                              if c.model == model})
        for workers in counts:
            cells = [c for c in dict.fromkeys(list(grid.cells) + list(grid.failed))
                     if (c.model, c.workers) == (model, workers)]
            if not cells:
                rows.append([model, str(workers), "—", "not run", "—"])
            for cell in cells:
                ran = ", ".join(grid.cells.get(cell, {})) or "—"
                failed = ", ".join(grid.failed.get(cell, {})) or "—"
                rows.append([model, str(workers), cell.setting, ran, failed])
    return Table("What the run covers", ["model", "workers", "links", "ran (ok)", "failed"], rows,
                 ["Every row of the paper's grid is listed; 'not run' marks a model or worker count the run has no "
                  "row for (a sweep run in chunks may be published part-way). Failed rows' reasons are under "
                  "Failures."])


def _bytes_table(grid):
    """Measured bytes per step per worker host (and per PS host) against workers, one link setting."""
    setting = _main_setting(grid)
    workers = sorted({c.workers for c in grid.cells if c.setting == setting})
    rows = []
    for model in dict.fromkeys(c.model for c in grid.cells if c.setting == setting):
        names = dict.fromkeys(n for c, cell in grid.cells.items() if (c.model, c.setting) == (model, setting)
                              for n in cell if n not in ("auto", "single"))
        for name in names:
            points = dict(grid.series(model, setting, name))
            cells = [_bytes_cell(points.get(w)) for w in workers]
            if any(c != "—" for c in cells):
                rows.append([model, name] + cells)
    if not rows:
        return None
    return Table(f"Bytes per step against workers ({setting})", ["model", "strategy"] + [f"{w} workers" for w in workers],
                 rows, ["Measured bytes per step, sent + received: per worker host (mean), then per PS host where the "
                        "strategy has one; 1 MB = 10^6 bytes. Bytes do not depend on the link rate, so one link "
                        "setting is shown. A strategy whose traffic grows with the model (sync PS, Horovod) against "
                        "one that ships only the conv tower and activations (ralp) and one that rings the tower "
                        "(ralp-hybrid)."])


def _bytes_cell(row):
    if row is None or is_missing(row.get("bytes_worker_measured")):
        return "—"
    text = fmt_bytes(row["bytes_worker_measured"])
    if not is_missing(row.get("bytes_ps_measured")):
        text += f" (PS {fmt_bytes(row['bytes_ps_measured'])})"
    return text


def _scaling(summary, keys, grid):
    """The report's scaling efficiency where the run has `single` rows; otherwise per-worker
    throughput relative to the fewest workers measured, in preset images/sec."""
    table = scaling_table(summary, keys)
    if table is not None:
        return table
    rows = []
    for model, setting in grid.settings():
        names = dict.fromkeys(n for c, cell in grid.cells.items() if (c.model, c.setting) == (model, setting)
                              for n in cell if n != "auto")
        for name in names:
            points = [(w, preset_rate(r) or r["images_per_sec"]) for w, r in grid.series(model, setting, name)]
            if len(points) < 2:
                continue
            w0, r0 = points[0]
            rows.append([model, setting, name] + [f"{w}: {fmt_rate(r)} img/s, {(r / w) / (r0 / w0):.0%}"
                                                   for w, r in points])
    if not rows:
        return None
    width = max(len(r) for r in rows)
    return Table("Scaling efficiency (relative to the fewest workers)",
                 ["model", "links", "strategy"] + [""] * (width - 3), [r + [""] * (width - len(r)) for r in rows],
                 ["No `single` rows in this run, so not the report's definition (images/sec(W) / (W × one process)): "
                  "here, per-worker throughput at W over per-worker throughput at the fewest workers measured, in "
                  "preset images/sec (100% = linear from there on)."])


def _extrapolation_table(series):
    if not series:
        return None
    ok = [s for s in series if s.ok is not None]
    return Table(f"Cost model's extrapolation to {EXTRAPOLATE_TO:,} workers",
                 ["model", "links", "strategy", "gain between measured worker counts", "slope check",
                  f"predicted img/s at {EXTRAPOLATE_TO:,}", "per-worker efficiency there"], slope_rows(series),
                 [f"ralp.cost_model.predict on the preset the rows were scaled to, with the rows' batch, cut and "
                  f"layout, anchored to the measured point at the fewest workers (preset images/sec). Slope check: the "
                  f"predicted gain between consecutive measured worker counts within ±{SLOPE_TOLERANCE:.0%} of the "
                  f"measured gain: ok in {sum(bool(s.ok) for s in ok)} of {len(ok)} series. Efficiency: per-worker "
                  f"throughput at {EXTRAPOLATE_TO:,} over that at the fewest workers measured."])
