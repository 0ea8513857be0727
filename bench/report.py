"""Tables and pages from stored result rows: the speedup table, measured against predicted,
accuracy, failures, and run-to-run comparison.

Why it is built this way: one summary (a row per configuration and strategy, repeats reduced
to their median) feeds every table and figure, so the numbers in report.md, index.html and
the PNGs cannot disagree. Tables are plain lists of strings rendered twice (Markdown for
pasting, HTML for the page). Configuration columns (batch size, compression, link speed, ...)
appear only when they vary, so a simple sweep gives a small table.
"""
import html
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from bench import plots
from bench.results import SCHEMA_VERSION, VERSION_COLUMN, coerce_frame, is_missing
from ralp.hardware import format_bandwidth

STRATEGY_ORDER = ("single", "ps", "ps-colocated", "ps-async", "horovod", "ralp", "auto")
PS_LAYOUTS = ("ps", "ps-colocated")  # sync PS on dedicated PS hosts | a PS task on every worker host
# Shown as table columns only when they take more than one value in the rows reported.
CONFIG_KEYS = ("dataset", "batch_size", "compression", "cluster_mode", "hosts", "ps", "link_bps",
               "ps_link_bps", "latency_s", "scaled_to", "cpus_per_host")
MEASURES = ("images_per_sec", "step_time_median_s", "step_time_p10_s", "step_time_p90_s",
            "bytes_ps_measured", "bytes_ps_predicted", "bytes_worker_measured",
            "bytes_worker_predicted", "predicted_step_time_s", "accuracy", "target_accuracy",
            "steps_to_accuracy", "time_to_accuracy_s", "final_loss", "link_efficiency",
            "tcp_retransmit_max", "tcp_timeouts", "cpu_steal")
ENVIRONMENT = ("git_commit", "git_dirty", "tf_version", "horovod_version", "mpi_version",
               "python_version", "cpu_model", "cpu_cores", "gpus", "hostname", "cluster_mode",
               "hosts", "link_bps")
DISCREPANCY_LIMIT = 0.10
LINK_EFFICIENCY_LIMIT = 0.85  # below this share of line rate, a row measured the transport
RETRANSMIT_LIMIT = 0.01       # above this share of TCP segments resent, likewise
STEAL_LIMIT = 0.05            # above this share of the VM's CPU taken by its hypervisor, likewise
PLOT_FILES = ("throughput.png", "bytes_per_step.png", "predicted_vs_measured.png")


@dataclass
class Table:
    """A titled grid of display strings, rendered to Markdown or HTML."""

    title: str
    headers: list
    rows: list
    notes: list = field(default_factory=list)


@dataclass
class Report:
    title: str
    intro: list
    tables: list
    plots: list = field(default_factory=list)  # (file name, caption)


# ---------------------------------------------------------------- summary --------------------

def display_strategies(df):
    """Sync PS with a PS task on every worker host is its own column, ``ps-colocated``: the
    two layouts are different baselines, and speedups name the faster one."""
    if "ps_placement" in df:
        colocated = (df["strategy"] == "ps") & (df["ps_placement"] == "colocated")
        if colocated.any():
            df = df.copy()
            df.loc[colocated, "strategy"] = "ps-colocated"
    return df


def config_keys(df, include_run=True):
    """Configuration columns needed to tell rows apart: those taking more than one value for
    the same (model, workers, strategy). A column that only follows the model or the worker
    count (batch size per model, hosts = workers + 1) is left out. run_id joins the keys when
    the same configuration appears in several runs."""
    candidates = list(CONFIG_KEYS) + (["run_id"] if include_run else [])
    if df.empty:
        return []
    spread = df.groupby(["model", "workers", "strategy"], dropna=False)[candidates].nunique(
        dropna=False).max()
    return [k for k in candidates if spread[k] > 1]


def summarize(df, keys):
    """One row per (model, workers, keys..., strategy); repeats reduced to medians of ok rows."""
    df = df.fillna({"model": "unknown", "strategy": "unknown"})
    group_cols = ["model", "workers", *keys, "strategy"]
    records = []
    for values, rows in df.groupby(group_cols, dropna=False, sort=False):
        record = dict(zip(group_cols, values))
        ok = rows[rows["status"].fillna("ok") != "failed"]
        if len(ok):
            record.update({m: _median(ok[m]) for m in MEASURES})
            record.update(status="ok", failure=None, repeats=len(ok),
                          plan=_first(ok["plan"]), cut_layer=_first(ok["cut_layer"]),
                          link_pattern=_first(ok["link_pattern"]), step_times=_all_steps(ok))
        else:
            record.update({m: math.nan for m in MEASURES})
            record.update(status="failed", repeats=len(rows), plan=_first(rows["plan"]),
                          cut_layer=None, failure=_first(rows["failure"]) or "no reason recorded")
        records.append({k: (None if is_missing(v) else v) for k, v in record.items()})
    summary = pd.DataFrame.from_records(records)
    if summary.empty:
        return summary
    summary["_order"] = summary["strategy"].map(_strategy_rank)
    summary = summary.sort_values(["model", "workers", *keys, "_order"], na_position="first",
                                  key=lambda col: col.map(_sort_key))
    return summary.drop(columns="_order").reset_index(drop=True)


def _all_steps(rows):
    """Every timed step of the ok rows (repeats pooled), or None when a row kept none."""
    from bench.stats import parse_steps

    if "step_times_s" not in rows:
        return None
    parts = [parse_steps(text) for text in rows["step_times_s"]]
    if any(p is None for p in parts):
        return None
    return np.concatenate(parts).tolist()


def _strategy_rank(strategy):
    return STRATEGY_ORDER.index(strategy) if strategy in STRATEGY_ORDER else len(STRATEGY_ORDER)


def _sort_key(value):
    return (0, value, "") if isinstance(value, (int, float)) else (1, 0, str(value))


def _median(column):
    values = pd.to_numeric(column, errors="coerce").dropna()
    return float(values.median()) if len(values) else math.nan


def _first(column):
    values = column.dropna()
    return values.iloc[0] if len(values) else None


# ---------------------------------------------------------------- formatting -----------------

def fmt_bytes(value):
    if is_missing(value):
        return "—"
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(value) >= size:
            return f"{value / size:.1f} {unit}"
    return f"{value:.0f} B"


def fmt_rate(value):
    if is_missing(value):
        return "—"
    return f"{value:,.0f}" if value >= 1000 else f"{value:,.1f}"


def fmt_seconds(value):
    if is_missing(value):
        return "—"
    return f"{value:.3g} s"


def fmt_key(key, value):
    if is_missing(value):
        return "—"
    if key in ("link_bps", "ps_link_bps"):
        return format_bandwidth(value)
    if key == "latency_s":
        return f"{value * 1e3:g} ms"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def fmt_discrepancy(measured, predicted):
    """Relative error of the prediction, flagged with ⚠ beyond DISCREPANCY_LIMIT."""
    if is_missing(measured) or is_missing(predicted) or not predicted:
        return "—"
    error = (measured - predicted) / predicted
    flag = " ⚠" if abs(error) > DISCREPANCY_LIMIT else ""
    return f"{error:+.0%}{flag}"


def _one_line(text, limit=80):
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _key_cells(row, keys):
    return [str(row["model"]), fmt_key("workers", row["workers"])] + [fmt_key(k, row[k]) for k in keys]


def _key_headers(keys):
    return ["model", "workers"] + keys


def _strategies(summary):
    return sorted(summary["strategy"].dropna().unique(), key=_strategy_rank)


def _groups(summary, keys):
    return summary.groupby(["model", "workers", *keys], dropna=False, sort=False)


# ---------------------------------------------------------------- tables ---------------------

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
                cells.append("failed: " + _one_line(row["failure"], 60))
            else:
                cells.append(_throughput_cell(row, baselines))
        rows.append(_key_cells(group.iloc[0], keys) + cells)
    notes = ["Cells: images/sec over all workers (median over repeats); where rows kept their step times, "
             "the median over timed steps [95% bootstrap interval] ±jitter (tf_cnn_benchmarks' MAD-based "
             "spread). In brackets the speedup over the best measured sync-PS layout (`ps`: dedicated PS host; "
             "`ps-colocated`: a PS task on every worker host; named) and over `horovod` in the same row (ratio "
             "of median step times); '≈ ps' marks no significant difference (the speedup's 95% interval "
             "holds 1.0). `auto` shows the plan it ran; `single` is one process alone (one batch per step)."]
    return Table("Throughput and speedup", _key_headers(keys) + strategies, rows, notes)


def _baselines(by_strategy):
    """What speedups are taken over: the faster sync-PS layout measured in this row, and Horovod."""
    ok = {name: r for name, r in by_strategy.items()
          if r["status"] == "ok" and not is_missing(r["images_per_sec"])}
    layouts = [name for name in PS_LAYOUTS if name in ok]
    chosen = [max(layouts, key=lambda name: ok[name]["images_per_sec"])] if layouts else []
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
        rows.append(_key_cells(group.iloc[0], keys) + [fmt_rate(single["images_per_sec"])] + cells)
    if not rows:
        return None
    return Table("Scaling efficiency", _key_headers(keys) + ["single img/s"] + strategies, rows,
                 ["images/sec at W workers / (W × images/sec of one process alone): the same model, batch and "
                  "data, on one host of the same cluster (so under the same CPU quota), with no communication "
                  "(so one measurement serves every link setting). 100% is linear scaling."])


def _compute_key(row):
    """What one process's speed depends on: the model, its batch, and the host's CPU quota."""
    return tuple(str(row.get(k)) for k in ("model", "workers", "batch_size", "cpus_per_host", "cluster_mode"))


def _steps_of(row):
    steps = row.get("step_times")
    return steps if isinstance(steps, (list, tuple)) and len(steps) else None


def _throughput_cell(row, baselines):
    """'128 [121–134] ±4 (1.6× ps, ≈ horovod)': median images/sec with its 95% bootstrap interval and
    jitter when the row kept its step times, then speedups; one whose interval holds 1.0 is '≈'."""
    from bench.stats import rate_summary, speedup_ci

    rate = row["images_per_sec"]
    steps = _steps_of(row)
    if row["strategy"] == "single":  # one batch per step: step-time ratios are not speedups
        baselines = {}
    text = fmt_rate(rate)
    if steps and len(steps) >= 3 and not is_missing(rate):
        images_per_step = rate * float(np.mean(steps))  # images/sec is images over the timed steps' time
        s = rate_summary(steps, images_per_step)
        text = f"{fmt_rate(s['median'])} [{fmt_rate(s['low'])}–{fmt_rate(s['high'])}] ±{fmt_rate(s['jitter'])}"
    if row["strategy"] == "auto" and row.get("plan"):
        text += f" [ran {row['plan']}]"
    speedups = []
    for name, base in baselines.items():
        if name == row["strategy"] or is_missing(rate) or is_missing(base["images_per_sec"]) or not base[
                "images_per_sec"] > 0:
            continue
        base_steps = _steps_of(base)
        if steps and base_steps and len(steps) >= 3 and len(base_steps) >= 3:
            ratio, low, high = speedup_ci(base_steps, steps)
            speedups.append(f"{ratio:.2f}× {name}" if not (low <= 1.0 <= high) else f"≈ {name}")
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
    headers = _key_headers(keys) + ["strategy"]
    for label, *_ in triples:
        headers += [f"{label} measured", "predicted", "error"]
    rows = []
    for _, row in ok.iterrows():
        if not any(not is_missing(row[c]) for _, m, p, _f in triples for c in (m, p)):
            continue
        cells = _key_cells(row, keys) + [row["strategy"]]
        for _, measured, predicted, fmt in triples:
            cells += [fmt(row[measured]), fmt(row[predicted]),
                      fmt_discrepancy(row[measured], row[predicted])]
        rows.append(cells)
    notes = ["Bytes are per step, sent + received, per worker host (average) and per PS host; "
             "1 MB = 10^6 bytes. error = (measured − predicted) / predicted; "
             f"⚠ marks errors beyond {DISCREPANCY_LIMIT:.0%}."]
    return Table("Measured against predicted", headers, rows, notes)


AUTO_TOLERANCE = 0.05  # auto "picked well" when its plan is within this of the measured best


def auto_table(summary, keys):
    """Did ``auto`` run the plan that measured fastest? One row per group that has auto and others."""
    rows, hits = [], 0
    for _, group in _groups(summary, keys):
        ok = {r["strategy"]: r for _, r in group.iterrows() if r["status"] == "ok"}
        others = {s: r for s, r in ok.items() if s != "auto" and not is_missing(r["images_per_sec"])}
        if "auto" not in ok or not others:
            continue
        best = max(others, key=lambda s: others[s]["images_per_sec"])
        ran = str(ok["auto"].get("plan") or "?").split("+")[0]
        ran_rate = others[ran]["images_per_sec"] if ran in others else ok["auto"]["images_per_sec"]
        share = ran_rate / others[best]["images_per_sec"]
        good = ran == best or share >= 1 - AUTO_TOLERANCE
        hits += good
        verdict = "best" if ran == best else (f"within {1 - share:.0%}" if good else f"{1 - share:.0%} slower ⚠")
        rows.append(_key_cells(group.iloc[0], keys) + [ran, best, verdict])
    if not rows:
        return None
    return Table("Does auto pick the measured best?", _key_headers(keys) + ["auto ran", "measured best", "verdict"],
                 rows, [f"auto ran the measured-best plan, or one within {AUTO_TOLERANCE:.0%} of it, in {hits} of "
                        f"{len(rows)} cells (the plan's own row measures it, so noise between runs does not count)."])


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
        rows.append(_key_cells(group.iloc[0], keys) + cells)
    notes = ["Cells: final accuracy; time (and steps) to reach the target accuracy; final loss."]
    return Table("Accuracy", _key_headers(keys) + strategies, rows, notes)


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
    rows = [_key_cells(r, keys) + [r["strategy"], _one_line(r["failure"], 300)]
            for _, r in failed.iterrows()]
    return Table("Failures", _key_headers(keys) + ["strategy", "reason"], rows)


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

    rows = [_key_cells(r, keys) + [r["strategy"], r.get("link_pattern") or "—",
                                   flagged(r.get("link_efficiency"), lambda v: v < LINK_EFFICIENCY_LIMIT),
                                   flagged(r.get("tcp_retransmit_max"), lambda v: v > RETRANSMIT_LIMIT),
                                   "—" if is_missing(r.get("tcp_timeouts")) else str(int(r["tcp_timeouts"])),
                                   flagged(r.get("cpu_steal"), lambda v: v > STEAL_LIMIT)]
            for _, r in low.iterrows()]
    return Table("Transport health", _key_headers(keys) + ["strategy", "pattern", "share of line rate",
                                                           "TCP segments resent (busiest host)", "timeouts",
                                                           "CPU stolen by the hypervisor"], rows,
                 [f"Rows whose strategy's traffic pattern reached less than {LINK_EFFICIENCY_LIMIT:.0%} of the "
                  f"links' rate (bench/launch/link_probe.py), or whose busiest host resent more than "
                  f"{RETRANSMIT_LIMIT:.0%} of its TCP segments over the timed steps, or whose machine lost more "
                  f"than {STEAL_LIMIT:.0%} of its CPU time to other guests of its hypervisor during the run: their "
                  "times partly measure the transport or the neighbours, not the strategy."])


def run_lines(df):
    """One line per run: when, how many rows, and the environment it ran in."""
    lines = []
    for run_id, rows in df.groupby("run_id", sort=False):
        started = rows["started_at"].dropna()
        parts = [f"`{run_id}`", f"started {min(started)}" if len(started) else "start unknown",
                 f"{len(rows)} rows"]
        for name in ENVIRONMENT:
            values = [fmt_key(name, v) for v in dict.fromkeys(rows[name].dropna())]
            if values:
                parts.append(f"{name} {'/'.join(values)}")
        lines.append("- " + "; ".join(parts))
    return lines


def build_report(df, title="ralp-bench report"):
    """The report for the given rows (one or more runs) as tables ready to render.

    ``df`` may be a store frame or a plain DataFrame of ``new_row`` dicts (fresh rows of a run).
    """
    df = display_strategies(coerce_frame(df))
    keys = config_keys(df)
    summary = summarize(df, keys)
    intro = [f"{df['run_id'].nunique()} run(s), {len(df)} rows:"] + run_lines(df)
    if "batch_size" not in keys and df["batch_size"].notna().any():
        batches = df.dropna(subset=["batch_size"]).groupby("model", sort=True)["batch_size"].first()
        intro.append("Batch per worker: " + ", ".join(f"{m} {b}" for m, b in batches.items()) + ".")
    if df["scaled_to"].notna().any():
        intro.append("Rows with a `scaled_to` value were measured here on emulated links slowed so that this "
                     "machine's compute-to-network ratio matches that preset (`link_bps` is the emulated rate); "
                     "their speedups stand for the preset's cluster, their images/sec for this machine.")
    old = df[df[VERSION_COLUMN] < SCHEMA_VERSION] if VERSION_COLUMN in df else df.iloc[:0]
    if len(old):
        intro.append(f"{len(old)} rows come from files of an older schema; fields they lack show as —.")
    tables = [t for t in (throughput_table(summary, keys), scaling_table(summary, keys),
                          prediction_table(summary, keys),
                          auto_table(summary, keys), accuracy_table(summary, keys), health_table(summary, keys),
                          failure_table(summary, keys)) if t]
    return Report(title, intro, tables), summary, keys


def write_report(df, out_dir, title="ralp-bench report"):
    """Write report.md, index.html and the PNGs to ``out_dir``; return the Markdown text."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    report, summary, keys = build_report(df, title)
    made = [  # configuration keys that vary are drawn as separate series
        (plots.throughput_plot(summary, keys, out / PLOT_FILES[0]),
         "Images/sec against workers, one panel per model."),
        (plots.bytes_plot(summary, keys, out / PLOT_FILES[1]),
         "Bytes per step per strategy, measured beside predicted."),
        (plots.predicted_vs_measured_plot(summary, out / PLOT_FILES[2]),
         "Cost-model prediction against measurement."),
    ]
    for name in PLOT_FILES:  # a figure not drawn this time must not linger from an older report
        if not any(path and path.name == name for path, _ in made):
            (out / name).unlink(missing_ok=True)
    report.plots = [(path.name, caption) for path, caption in made if path]
    text = to_markdown(report)
    (out / "report.md").write_text(text, encoding="utf-8")
    (out / "index.html").write_text(to_html(report), encoding="utf-8")
    return text


# ---------------------------------------------------------------- compare --------------------

def compare(df_a, df_b, threshold=0.10, label_a="A", label_b="B"):
    """asv-compare-like table of images/sec in A and B with faster/slower marks."""
    df_a, df_b = display_strategies(coerce_frame(df_a)), display_strategies(coerce_frame(df_b))
    keys = config_keys(pd.concat([df_a, df_b], ignore_index=True), include_run=False)
    cols = ["model", "workers", *keys, "strategy"]
    sa, sb = summarize(df_a, keys), summarize(df_b, keys)
    for col in cols:  # a key one run never set is all-None (object); the other run's is numeric
        if col in sa and col in sb and sa[col].dtype != sb[col].dtype:
            sa[col], sb[col] = sa[col].astype(object), sb[col].astype(object)
    merged = sa.merge(sb, on=cols, how="outer", suffixes=("_a", "_b"), indicator=True, sort=False)
    merged["_order"] = merged["strategy"].map(_strategy_rank)
    merged = merged.sort_values(["model", "workers", *keys, "_order"], na_position="first",
                                key=lambda col: col.map(_sort_key))
    rows, only = [], {"left_only": [], "right_only": []}
    counts = {"faster": 0, "slower": 0, "unchanged": 0, "failed": 0}
    for _, r in merged.iterrows():
        key_cells = _key_cells(r, keys) + [r["strategy"]]
        if r["_merge"] != "both":
            only[r["_merge"]].append(key_cells)
            continue
        a, b = r["images_per_sec_a"], r["images_per_sec_b"]
        if r["status_a"] != "ok" or r["status_b"] != "ok":
            mark = {(False, True): f"fixed in {label_b}", (True, False): f"failed in {label_b}"}.get(
                (r["status_a"] == "ok", r["status_b"] == "ok"), "failed in both")
            ratio = "—"
            counts["failed"] += 1
        else:
            value = b / a if a else math.inf
            mark = ("faster" if value > 1 + threshold else
                    "slower" if value < 1 / (1 + threshold) else "unchanged")
            ratio = f"{value:.2f}"
            counts[mark] += 1
        rows.append(key_cells + [fmt_rate(a), fmt_rate(b), ratio, mark])
    headers = _key_headers(keys) + ["strategy"]
    tables = [Table(f"images/sec: {label_a} → {label_b}",
                    headers + [f"{label_a} img/s", f"{label_b} img/s", "ratio B/A", "change"], rows,
                    [f"faster: ratio > {1 + threshold:.2f}; slower: ratio < {1 / (1 + threshold):.2f} "
                     f"(threshold {threshold:.0%}); unchanged otherwise."])]
    for side, label in (("left_only", label_a), ("right_only", label_b)):
        if only[side]:
            tables.append(Table(f"Only in {label}", headers, only[side]))
    intro = [", ".join(f"{n} {k}" for k, n in counts.items())] + _environment_changes(df_a, df_b)
    return Report(f"Compare {label_a} → {label_b}", intro, tables), counts


def _environment_changes(df_a, df_b):
    lines = []
    for name in ENVIRONMENT:
        a = sorted({fmt_key(name, v) for v in df_a[name].dropna()})
        b = sorted({fmt_key(name, v) for v in df_b[name].dropna()})
        if a != b:
            lines.append(f"- {name}: {'/'.join(a) or '—'} → {'/'.join(b) or '—'}")
    return (["Environment differences:"] + lines) if lines else []


# ---------------------------------------------------------------- rendering ------------------

def _md_cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def to_markdown(report):
    out = [f"# {report.title}", ""] + report.intro + [""]
    for table in report.tables:
        out += [f"## {table.title}", ""]
        out.append("| " + " | ".join(_md_cell(h) for h in table.headers) + " |")
        out.append("|" + "|".join("---" for _ in table.headers) + "|")
        out += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in table.rows]
        out += [""] + table.notes + ([""] if table.notes else [])
    if report.plots:
        out += ["## Plots", ""] + [f"![{caption}]({name})" for name, caption in report.plots] + [""]
    return "\n".join(out)


_CSS = """body{font-family:system-ui,sans-serif;margin:2em;max-width:1400px;color:#222}
table{border-collapse:collapse;margin:.5em 0 1em}th,td{border:1px solid #ccc;padding:4px 8px;
text-align:left;vertical-align:top}th{background:#f3f3f3}td.warn{background:#fff3cd}
td.failed{background:#f8d7da}td.faster{background:#d4edda}td.slower{background:#f8d7da}
img{max-width:100%;border:1px solid #ddd;margin:.5em 0}p.note{color:#555;font-size:.9em}"""


def _cell_class(text):
    if "⚠" in text:
        return "warn"
    if text.startswith("failed"):
        return "failed"
    return text if text in ("faster", "slower") else ""


def _inline(text):
    """HTML-escape, then turn `code` spans into <code>."""
    parts = html.escape(text).split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


def to_html(report):
    body = [f"<h1>{html.escape(report.title)}</h1>"]
    body += [f"<p>{_inline(line.removeprefix('- '))}</p>" for line in report.intro]
    for table in report.tables:
        body.append(f"<h2>{html.escape(table.title)}</h2><table><thead><tr>")
        body.append("".join(f"<th>{html.escape(str(h))}</th>" for h in table.headers))
        body.append("</tr></thead><tbody>")
        for row in table.rows:
            cells = "".join(f'<td class="{_cell_class(str(c))}">{html.escape(str(c))}</td>'
                            for c in row)
            body.append(f"<tr>{cells}</tr>")
        body.append("</tbody></table>")
        body += [f'<p class="note">{_inline(n)}</p>' for n in table.notes]
    for name, caption in report.plots:
        body.append(f'<figure><img src="{html.escape(name)}" alt="{html.escape(caption)}">'
                    f"<figcaption>{html.escape(caption)}</figcaption></figure>")
    return ("<!doctype html><html><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(report.title)}</title><style>{_CSS}</style></head><body>\n"
            + "\n".join(body) + "\n</body></html>\n")
