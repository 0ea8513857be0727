"""The report's tables, each from the one summary (bench/report/summary.py): throughput with
intervals and speedups, scaling efficiency, measured against predicted, fraction of the plan's
bound, auto's picks, accuracy, transport health and failures."""
import pandas as pd

from bench.core.stats import as_launches, launch_estimate, rate_summary, significant, speedup_ci, step_count
from bench.report.format import (DISCREPANCY_LIMIT, Table, fmt_bytes, fmt_discrepancy, fmt_key, fmt_rate,
                                 fmt_seconds, one_line)
from bench.report.summary import PS_LAYOUTS, strategy_rank
from bench.store.results import is_missing

LINK_EFFICIENCY_LIMIT = 0.85  # below this share of line rate, a row measured the transport
RETRANSMIT_LIMIT = 0.01       # above this share of TCP segments resent, likewise
STEAL_LIMIT = 0.05            # above this share of the VM's CPU taken by its hypervisor, likewise
ONE_LAUNCH = "†"              # after an interval that resamples the steps of a single launch
ONE_LAUNCH_NOTE = (f"{ONE_LAUNCH} One launch (repeat) only: the interval resamples that launch's steps, so "
                   "the spread between launches (1.6–10.8% between two launches of one cell in this project's "
                   "runs) is not in it, nor in that row's speedup verdicts; measure with `--repeats` 2 or more "
                   "(`repeats` in a sweep file) for an interval over launches.")


def key_cells(row, keys):
    return [str(row["model"]), fmt_key("workers", row["workers"])] + [fmt_key(k, row[k]) for k in keys]


def key_headers(keys):
    return ["model", "workers"] + keys


def _strategies(summary):
    return sorted(summary["strategy"].dropna().unique(), key=strategy_rank)


def _groups(summary, keys):
    return summary.groupby(["model", "workers", *keys], dropna=False, sort=False)


def throughput_table(summary, keys):
    """Rows model x workers (x varying config), columns strategies: images/sec and speedups."""
    strategies = _strategies(summary)
    rows = []
    for _, group in _groups(summary, keys):
        by_strategy = {r["strategy"]: r for _, r in group.iterrows()}
        baselines = _baselines(by_strategy)
        cells = []
        for strategy in strategies:
            row = by_strategy.get(strategy)
            if row is None:
                cells.append("—")
            elif row["status"] != "ok":
                cells.append("failed: " + one_line(row["failure"], 60))
            else:
                cells.append(_throughput_cell(row, baselines))
        rows.append(key_cells(group.iloc[0], keys) + cells)
    notes = ["Cells: images/sec over all workers (median over repeats); where rows kept their step times, the "
             "mean over launches (repeats) of each launch's median [95% interval over launches: a two-level "
             "bootstrap, launches then their steps, with Student's t for few launches; bench/core/stats.py] ±jitter "
             "(tf_cnn_benchmarks' MAD-based spread of the steps). In brackets the speedup over the best measured "
             "sync-PS layout (`ps`: dedicated PS host; `ps-colocated`: a PS task on every worker host; named) and "
             "over `horovod` in the same row (ratio of median step times); '≈ ps' marks no significant difference "
             "(the speedup's 95% interval holds 1.0). `auto` shows the plan it ran; `single` is one process alone "
             "(one batch per step)."]
    if any(ONE_LAUNCH in cell for row in rows for cell in row):
        notes.append(ONE_LAUNCH_NOTE)
    return Table("Throughput and speedup", key_headers(keys) + strategies, rows, notes)


def _baselines(by_strategy):
    """What speedups are taken over: the faster sync-PS layout measured in this row, and Horovod."""
    ok = {name: r for name, r in by_strategy.items()
          if r["status"] == "ok" and not is_missing(r["images_per_sec"])}
    layouts = [name for name in PS_LAYOUTS if name in ok]
    chosen = [max(layouts, key=lambda name: shown_rate(ok[name]))] if layouts else []
    return {name: ok[name] for name in chosen + ["horovod"] if name in ok}


def scaling_table(summary, keys):
    """images/sec at W workers over W x the one-process reference (``single``), per strategy."""
    strategies = [s for s in _strategies(summary) if s != "single"]
    # One process moves no bytes: its measurement serves every link setting of the same model,
    # worker count (the cluster's size) and CPU quota.
    alone = {_compute_key(r): r for _, r in summary.iterrows()
             if r["strategy"] == "single" and r["status"] == "ok" and not is_missing(r["images_per_sec"])
             and r["images_per_sec"] > 0}
    rows = []
    for _, group in _groups(summary, keys):
        by_strategy = {r["strategy"]: r for _, r in group.iterrows() if r["status"] == "ok"}
        single = by_strategy.get("single")
        if single is None:
            single = alone.get(_compute_key(group.iloc[0]))
        if single is None or is_missing(single["images_per_sec"]) or not single["images_per_sec"] > 0:
            continue
        workers = int(group.iloc[0]["workers"])
        cells = []
        for strategy in strategies:
            row = by_strategy.get(strategy)
            rate = None if row is None else row["images_per_sec"]
            cells.append("—" if is_missing(rate) else f"{rate / (workers * single['images_per_sec']):.0%}")
        rows.append(key_cells(group.iloc[0], keys) + [fmt_rate(single["images_per_sec"])] + cells)
    if not rows:
        return None
    return Table("Scaling efficiency", key_headers(keys) + ["single img/s"] + strategies, rows,
                 ["images/sec at W workers / (W × images/sec of one process alone): the same model, batch and "
                  "data, on one host of the same cluster (so under the same CPU quota), with no communication "
                  "(so one measurement serves every link setting). 100% is linear scaling."])


def _compute_key(row):
    """What one process's speed depends on: the model, its batch, and the host's CPU quota."""
    return tuple(str(row.get(k)) for k in ("model", "workers", "batch_size", "cpus_per_host", "cluster_mode"))


def _steps_of(row):
    """The row's timed steps, one list per launch, when it kept at least 3 (else None)."""
    steps = row.get("step_times")
    return steps if isinstance(steps, (list, tuple)) and step_count(steps) >= 3 else None


def shown_rate(row) -> float:
    """The images/sec a reader sees in the row's throughput cell (``rate_summary``'s estimate: the
    mean over launches of each launch's median rate) where the row kept its steps, else the row's
    images/sec. What the speedups and auto's verdict compare, so a table never ranks by one figure
    and shows another; without ``rate_summary``'s bootstraps, which only the cell's interval needs."""
    steps = _steps_of(row)
    if steps and not is_missing(row.get("images_per_step")):
        return launch_estimate([row["images_per_step"] / launch for launch in as_launches(steps)])
    return row["images_per_sec"]


def _throughput_cell(row, baselines):
    """'128 [121–134] ±4 (1.6× ps, ≈ horovod)': images/sec with its 95% interval over launches and
    jitter when the row kept its step times (marked ONE_LAUNCH when it had one launch), then
    speedups; one whose interval holds 1.0 is '≈'."""
    rate = row["images_per_sec"]
    steps = _steps_of(row)
    if row["strategy"] == "single":  # one batch per step: step-time ratios are not speedups
        baselines = {}
    text = fmt_rate(rate)
    if steps and not is_missing(row.get("images_per_step")):
        s = rate_summary(steps, row["images_per_step"])
        mark = ONE_LAUNCH if s["launches"] == 1 else ""
        text = (f"{fmt_rate(s['median'])} [{fmt_rate(s['low'])}–{fmt_rate(s['high'])}]{mark} "
                f"±{fmt_rate(s['jitter'])}")
    if row["strategy"] == "auto" and row.get("plan"):
        text += f" [ran {row['plan']}]"
    speedups = []
    for name, base in baselines.items():
        if name == row["strategy"] or is_missing(rate) or is_missing(base["images_per_sec"]) or not base[
                "images_per_sec"] > 0:
            continue
        base_steps = _steps_of(base)
        if steps and base_steps:
            ratio, low, high = speedup_ci(base_steps, steps)
            speedups.append(f"{ratio:.2f}× {name}" if significant(low, high) else f"≈ {name}")
        else:
            speedups.append(f"{rate / base['images_per_sec']:.2f}× {name}")
    return text + (f" ({', '.join(speedups)})" if speedups else "")


def prediction_table(summary, keys):
    """Measured beside predicted: bytes per step (worker, PS host) and step time, flagged >10%."""
    triples = [("worker bytes/step", "bytes_worker_measured", "bytes_worker_predicted", fmt_bytes),
               ("PS bytes/step", "bytes_ps_measured", "bytes_ps_predicted", fmt_bytes),
               ("step time", "step_time_median_s", "predicted_step_time_s", fmt_seconds)]
    ok = summary[summary["status"] == "ok"]
    triples = [t for t in triples if ok[[t[1], t[2]]].notna().any().any()]
    if not triples:
        return None
    headers = key_headers(keys) + ["strategy"]
    for label, *_ in triples:
        headers += [f"{label} measured", "predicted", "error"]
    rows = []
    for _, row in ok.iterrows():
        if not any(not is_missing(row[c]) for _, m, p, _f in triples for c in (m, p)):
            continue
        cells = key_cells(row, keys) + [row["strategy"]]
        for _, measured, predicted, fmt in triples:
            cells += [fmt(row[measured]), fmt(row[predicted]),
                      fmt_discrepancy(row[measured], row[predicted])]
        rows.append(cells)
    notes = ["Bytes are per step, sent + received, per worker host (average) and per PS host; "
             "1 MB = 10^6 bytes. error = (measured − predicted) / predicted; "
             f"⚠ marks errors beyond {DISCREPANCY_LIMIT:.0%}."]
    bar = step_time_bar(ok)
    if bar:
        notes.append(bar)
    return Table("Measured against predicted", headers, rows, notes)


def fraction_of_bound(row):
    """The plan's bound over the measured median step time (1.0: as fast as the plan allows on
    its hardware), or None where either is missing."""
    measured, least = row.get("step_time_median_s"), row.get("bound_step_time_s")
    if is_missing(measured) or is_missing(least) or not measured > 0:
        return None
    return least / measured


def bound_table(summary, keys):
    """Per cell and strategy, how close the measured step came to the least step time its plan
    allows on its hardware (bench/driver/planning.py ``bound``), beside that bound; rows the cost model
    prices but that carry no bound (written before rows had one) show —."""
    ok = summary[(summary["status"] == "ok") & summary["step_time_median_s"].notna()
                 & summary["predicted_step_time_s"].notna()]
    if ok.empty:
        return None
    strategies = _strategies(ok)
    rows = []
    for _, group in _groups(ok, keys):
        by_strategy = {r["strategy"]: r for _, r in group.iterrows()}
        cells = [_bound_cell(by_strategy.get(strategy)) for strategy in strategies]
        rows.append(key_cells(group.iloc[0], keys) + cells)
    with_bound = int(ok["bound_step_time_s"].notna().sum())
    notes = ["Cells: fraction of bound = the plan's bound / its measured median step time (1.00: as fast as the "
             "plan allows on its hardware), then the bound. The bound is the cost model's pricing of the row's own "
             "plan with every resource busy at once: the largest of each host's compute under its CPU cap (a "
             "colocated PS task's work on its worker's host), each link direction's bytes at line rate plus one "
             "latency (ralp/cost_model.py, overlap). It leaves out what orders the work (the tower waiting for the "
             "head, the pull for the update), TensorFlow's transport CPU and start-up: the slack a better "
             "implementation of the same plan could remove."]
    why = ("their rows were written before rows carried a bound, and the calibration that priced them is not in "
           "this machine's cache (or pricing them again does not reproduce their prediction), so it is not guessed.")
    if not with_bound:  # a grid of dashes says nothing
        return Table("Fraction of bound", [], [], [f"None of the {len(ok)} cells has a bound: {why}"])
    if with_bound < len(ok):
        notes.append(f"{len(ok) - with_bound} of {len(ok)} cells show —: {why}")
    return Table("Fraction of bound", key_headers(keys) + strategies, rows, notes)


def _bound_cell(row):
    if row is None:
        return "—"
    fraction = fraction_of_bound(row)
    return "—" if fraction is None else f"{fraction:.2f} of {fmt_seconds(row['bound_step_time_s'])}"


STEP_TIME_BAR = 0.20  # issue 12's bar for the cost model's step time, per cell


def step_time_bar(ok):
    """How many cells' step time the cost model predicts within STEP_TIME_BAR, overall and among
    the cells measured while the hypervisor took at most STEAL_LIMIT of the machine's CPU (a
    neighbour's load the model does not describe; bench/launch/cpu_steal.py)."""
    rows = ok[ok["step_time_median_s"].notna() & ok["predicted_step_time_s"].notna()]
    if rows.empty:
        return None
    within = ((rows["step_time_median_s"] / rows["predicted_step_time_s"] - 1).abs() <= STEP_TIME_BAR)
    text = f"Step time within ±{STEP_TIME_BAR:.0%} of the cost model: {int(within.sum())} of {len(rows)} cells"
    steal = rows.get("cpu_steal")
    if steal is not None and steal.notna().any():
        quiet, stolen = steal.notna() & (steal <= STEAL_LIMIT), steal.notna() & (steal > STEAL_LIMIT)
        text += (f"; {int(within[quiet].sum())} of {int(quiet.sum())} measured under ≤ {STEAL_LIMIT:.0%} CPU steal, "
                 f"{int(within[stolen].sum())} of {int(stolen.sum())} above it")
    return text + "."


AUTO_TOLERANCE = 0.05  # auto "picked well" when its plan is within this of the measured best


def auto_table(summary, keys):
    """Did ``auto`` run the plan that measured fastest? One row per group that has auto and others."""
    rows, hits = [], 0
    for _, group in _groups(summary, keys):
        ok = {r["strategy"]: r for _, r in group.iterrows() if r["status"] == "ok"}
        others = {s: r for s, r in ok.items() if s != "auto" and not is_missing(r["images_per_sec"])}
        if "auto" not in ok or not others:
            continue
        best = max(others, key=lambda s: shown_rate(others[s]))
        ran = str(ok["auto"].get("plan") or "?").split("+")[0]
        mine = others[ran] if ran in others else ok["auto"]
        share = shown_rate(mine) / shown_rate(others[best])
        noise = ran != best and share < 1 - AUTO_TOLERANCE and _indistinct(mine, others[best])
        good = ran == best or share >= 1 - AUTO_TOLERANCE or noise
        hits += good
        verdict = ("best" if ran == best else "faster than every other" if share > 1 else
                   f"within {1 - share:.0%}" if share >= 1 - AUTO_TOLERANCE else
                   f"≈ {best} ({1 - share:.0%} slower, inside the noise)" if noise else f"{1 - share:.0%} slower ⚠")
        rows.append(key_cells(group.iloc[0], keys) + [ran, best, verdict])
    if not rows:
        return None
    return Table("Does auto pick the measured best?", key_headers(keys) + ["auto ran", "measured best", "verdict"],
                 rows, [f"auto ran the measured-best plan, one within {AUTO_TOLERANCE:.0%} of it, or one not "
                        f"significantly slower ('≈': the speedup's 95% interval holds 1.0, as in the throughput "
                        f"table) in {hits} of {len(rows)} cells (the plan's own row measures it, so noise between "
                        "runs does not count; images/sec as the throughput table shows it)."])


def _indistinct(row, best) -> bool:
    """Is ``best`` not significantly faster than ``row`` (both kept their steps)?"""
    mine, theirs = _steps_of(row), _steps_of(best)
    return bool(mine and theirs) and not significant(*speedup_ci(mine, theirs)[1:])


def accuracy_table(summary, keys):
    """Final accuracy and time-to-accuracy per strategy, when any row has them."""
    columns = ["accuracy", "time_to_accuracy_s", "final_loss"]
    if not summary[columns].notna().any().any():
        return None
    strategies = _strategies(summary)
    rows = []
    for _, group in _groups(summary, keys):
        by_strategy = {r["strategy"]: r for _, r in group.iterrows()}
        cells = []
        for strategy in strategies:
            row = by_strategy.get(strategy)
            cells.append("—" if row is None else
                         "failed" if row["status"] != "ok" else _accuracy_cell(row))
        rows.append(key_cells(group.iloc[0], keys) + cells)
    notes = ["Cells: final accuracy; time (and steps) to reach the target accuracy; final loss."]
    return Table("Accuracy", key_headers(keys) + strategies, rows, notes)


def _accuracy_cell(row):
    parts = []
    if not is_missing(row["accuracy"]):
        parts.append(f"acc {row['accuracy']:.3f}")
    if not is_missing(row["time_to_accuracy_s"]):
        target = "" if is_missing(row["target_accuracy"]) else f" to {row['target_accuracy']:.3g}"
        steps = "" if is_missing(row["steps_to_accuracy"]) else f", {row['steps_to_accuracy']:,.0f} steps"
        parts.append(f"{row['time_to_accuracy_s']:.3g} s{target}{steps}")
    if not is_missing(row["final_loss"]):
        parts.append(f"loss {row['final_loss']:.3g}")
    return " · ".join(parts) or "—"


def failure_table(summary, keys):
    failed = summary[summary["status"] == "failed"]
    if failed.empty:
        return None
    rows = [key_cells(r, keys) + [r["strategy"], one_line(r["failure"], 300)]
            for _, r in failed.iterrows()]
    return Table("Failures", key_headers(keys) + ["strategy", "reason"], rows)


def health_table(summary, keys):
    """Rows whose transport was unhealthy: the strategy's traffic pattern below
    LINK_EFFICIENCY_LIMIT of line rate, or more than RETRANSMIT_LIMIT of TCP segments resent."""
    link = summary.get("link_efficiency", pd.Series(dtype=float))
    resent = summary.get("tcp_retransmit_max", pd.Series(dtype=float))
    steal = summary.get("cpu_steal", pd.Series(dtype=float))
    low = summary[(link.notna() & (link < LINK_EFFICIENCY_LIMIT)) | (resent.notna() & (resent > RETRANSMIT_LIMIT))
                  | (steal.notna() & (steal > STEAL_LIMIT))]
    if low.empty:
        return None

    def flagged(value, bad):
        return "—" if is_missing(value) else f"{value:.{1 if value < 0.1 else 0}%}" + (" ⚠" if bad(value) else "")

    rows = [key_cells(r, keys) + [r["strategy"], r.get("link_pattern") or "—",
                                   flagged(r.get("link_efficiency"), lambda v: v < LINK_EFFICIENCY_LIMIT),
                                   flagged(r.get("tcp_retransmit_max"), lambda v: v > RETRANSMIT_LIMIT),
                                   "—" if is_missing(r.get("tcp_timeouts")) else str(int(r["tcp_timeouts"])),
                                   flagged(r.get("cpu_steal"), lambda v: v > STEAL_LIMIT)]
            for _, r in low.iterrows()]
    return Table("Transport health", key_headers(keys) + ["strategy", "pattern", "share of line rate",
                                                           "TCP segments resent (busiest host)", "timeouts",
                                                           "CPU stolen by the hypervisor"], rows,
                 [f"Rows whose strategy's traffic pattern reached less than {LINK_EFFICIENCY_LIMIT:.0%} of the "
                  f"links' rate (bench/launch/link_probe.py), or whose busiest host resent more than "
                  f"{RETRANSMIT_LIMIT:.0%} of its TCP segments over the timed steps, or whose machine lost more "
                  f"than {STEAL_LIMIT:.0%} of its CPU time to other guests of its hypervisor during the run: their "
                  "times partly measure the transport or the neighbours, not the strategy."])
