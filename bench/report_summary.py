"""One summary of stored rows, which every table and figure reads.

A row per configuration and strategy, repeats reduced to their median (their step
times pooled), so report.md, index.html and the PNGs cannot disagree. Configuration
columns appear only when they vary, so a simple sweep gives a small table.
"""
import math

import numpy as np
import pandas as pd

from bench.results import is_missing
from bench.strategy_specs import AUTO, SPECS

# Registration order (bench/strategy_specs.py), each colocatable one followed by its colocated layout.
STRATEGY_ORDER = tuple(n for name, spec in SPECS.items()
                       for n in ((name, name + "-colocated") if spec.colocatable else (name,))) + (AUTO,)
PS_LAYOUTS = ("ps", "ps-colocated")  # sync PS on dedicated PS hosts | a PS task on every worker host
# Shown as table columns only when they take more than one value in the rows reported.
CONFIG_KEYS = ("dataset", "batch_size", "compression", "cluster_mode", "hosts", "ps", "micro_batches", "link_bps",
               "ps_link_bps", "latency_s", "scaled_to", "cpus_per_host")
MEASURES = ("images_per_sec", "step_time_median_s", "step_time_p10_s", "step_time_p90_s",
            "bytes_ps_measured", "bytes_ps_predicted", "bytes_worker_measured",
            "bytes_worker_predicted", "predicted_step_time_s", "accuracy", "target_accuracy",
            "steps_to_accuracy", "time_to_accuracy_s", "final_loss", "link_efficiency",
            "tcp_retransmit_max", "tcp_timeouts", "cpu_steal")
ENVIRONMENT = ("git_commit", "git_dirty", "tf_version", "horovod_version", "mpi_version",
               "python_version", "cpu_model", "cpu_cores", "gpus", "hostname", "cluster_mode",
               "hosts", "link_bps")


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
    df = df[df["status"] != "noisy"]  # superseded by a re-measurement (bench/cpu_steal.py)
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
    summary["_order"] = summary["strategy"].map(strategy_rank)
    summary = summary.sort_values(["model", "workers", *keys, "_order"], na_position="first",
                                  key=lambda col: col.map(sort_key))
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


def strategy_rank(strategy):
    return STRATEGY_ORDER.index(strategy) if strategy in STRATEGY_ORDER else len(STRATEGY_ORDER)


def sort_key(value):
    return (0, value, "") if isinstance(value, (int, float)) else (1, 0, str(value))


def _median(column):
    values = pd.to_numeric(column, errors="coerce").dropna()
    return float(values.median()) if len(values) else math.nan


def _first(column):
    values = column.dropna()
    return values.iloc[0] if len(values) else None
