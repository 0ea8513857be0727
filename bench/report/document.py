"""Reports from stored result rows: the page (report.md, index.html, PNGs) and run-to-run comparison.

Why it is built this way: one summary (bench/report/summary.py: a row per configuration and
strategy, repeats reduced to their median) feeds every table (bench/report/tables.py) and
figure (bench/report/plots.py), so the numbers in report.md, index.html and the PNGs cannot
disagree; bench/report/format.py renders the same tables as Markdown for pasting and HTML
for the page.
"""
import math
from pathlib import Path

import pandas as pd

from bench.report import plots
from bench.report.format import Report, Table, fmt_key, fmt_rate, to_html, to_markdown  # noqa: F401 (API)
from bench.report.summary import (ENVIRONMENT, config_keys, display_strategies, sort_key, strategy_rank, summarize,
                                  with_bounds)
from bench.report.tables import (accuracy_table, auto_table, bound_table, failure_table, health_table, key_cells,
                                 key_headers, prediction_table, scaling_table, throughput_table)
from bench.store.results import SCHEMA_VERSION, VERSION_COLUMN, coerce_frame

PLOT_FILES = ("throughput.png", "bytes_per_step.png", "predicted_vs_measured.png")


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
    df = display_strategies(with_bounds(coerce_frame(df)))
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
                          prediction_table(summary, keys), bound_table(summary, keys),
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
    merged["_order"] = merged["strategy"].map(strategy_rank)
    merged = merged.sort_values(["model", "workers", *keys, "_order"], na_position="first",
                                key=lambda col: col.map(sort_key))
    rows, only = [], {"left_only": [], "right_only": []}
    counts = {"faster": 0, "slower": 0, "unchanged": 0, "failed": 0}
    for _, r in merged.iterrows():
        cells = key_cells(r, keys) + [r["strategy"]]
        if r["_merge"] != "both":
            only[r["_merge"]].append(cells)
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
        rows.append(cells + [fmt_rate(a), fmt_rate(b), ratio, mark])
    headers = key_headers(keys) + ["strategy"]
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
