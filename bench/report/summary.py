"""One summary of stored rows, which every table and figure reads.

A row per configuration and strategy, repeats reduced to their median, so report.md,
index.html and the PNGs cannot disagree. Each repeat is a launch of its own: ``step_times``
keeps one list of timed steps per launch, because launches differ by more than the steps of
one launch do and the report's intervals are taken over launches (bench/core/stats.py). Configuration
columns appear only when they vary, so a simple sweep gives a small table.
"""
import math

import numpy as np
import pandas as pd

from bench.core.errors import UserError
from bench.core.stats import launch_interval, launch_spread, parse_steps, pooled_interval
from bench.core.strategy_specs import AUTO, SPECS, rings_tower
from bench.driver.planning import stored_bound
from bench.store.results import ResultStore, is_missing

# Registration order (bench/core/strategy_specs.py), each colocatable one followed by its colocated layout.
STRATEGY_ORDER = tuple(n for name, spec in SPECS.items()
                       for n in ((name, name + "-colocated") if spec.colocatable else (name,))) + (AUTO,)
PS_LAYOUTS = ("ps", "ps-colocated")  # sync PS on dedicated PS hosts | a PS task on every worker host
# Shown as table columns only when they take more than one value in the rows reported: rows that
# differ in one of them are different configurations, never repeats of one.
CONFIG_KEYS = ("dataset", "batch_size", "compression", "cluster_mode", "hosts", "ps", "micro_batches", "link_bps",
               "ps_link_bps", "latency_s", "scaled_to", "cpus_per_host", "hybrid_bucket_mb", "intra_threads",
               "inter_threads")
# Settings only some strategies use: a row of a strategy that does not use one stands for every
# value of it in its (model, workers), so its cell sits beside each (tuned Horovod's beside the fused
# and the bucketed hybrid's), and no two values of it are ever summed up as repeats.
USED_BY = {"hybrid_bucket_mb": lambda strategy: rings_tower(strategy) or strategy == AUTO}
MEASURES = ("images_per_sec", "step_time_median_s", "step_time_p10_s", "step_time_p90_s",
            "bytes_ps_measured", "bytes_ps_predicted", "bytes_worker_measured",
            "bytes_worker_predicted", "predicted_step_time_s", "bound_step_time_s", "accuracy", "target_accuracy",
            "steps_to_accuracy", "time_to_accuracy_s", "final_loss", "link_efficiency",
            "tcp_retransmit_max", "tcp_timeouts", "cpu_steal")
ENVIRONMENT = ("git_commit", "git_dirty", "tf_version", "horovod_version", "mpi_version",
               "python_version", "cpu_model", "cpu_cores", "gpus", "gpu_model", "cuda_version", "cudnn_version",
               "nccl_version", "nccl_built", "hostname", "cluster_mode",
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


def with_bounds(df):
    """``df`` with each ok, priced row's bound: its own column, or for a row written before rows
    carried one, the bound priced again from its configuration where that reproduces the row's
    own prediction (bench/driver/planning.py ``stored_bound``; else it stays empty and shows —). The
    stored rows are not changed. Only rows of this machine are priced (a model may be built)."""
    missing = df["bound_step_time_s"].isna() & df["predicted_step_time_s"].notna() & (df["status"] == "ok")
    if not missing.any():
        return df

    df = df.copy()
    priced = [stored_bound(row.to_dict()) for _, row in df[missing].iterrows()]
    df.loc[missing, "bound_step_time_s"] = [math.nan if b is None else b for b in priced]
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
    """One row per (model, workers, keys..., strategy); repeats reduced to medians of ok rows,
    their timed steps kept one list per repeat (``step_times``) and counted (``repeats``)."""
    df = df.fillna({"model": "unknown", "strategy": "unknown"})
    df = df[df["status"] != "noisy"]  # superseded by a re-measurement (bench/launch/cpu_steal.py)
    df = _beside_every_setting(df, keys)
    group_cols = ["model", "workers", *keys, "strategy"]
    records = []
    for values, rows in df.groupby(group_cols, dropna=False, sort=False):
        record = dict(zip(group_cols, values))
        ok = rows[rows["status"].fillna("ok") != "failed"]
        if len(ok):
            record.update({m: _median(ok[m]) for m in MEASURES})
            record.update(status="ok", failure=None, repeats=len(ok),
                          plan=_first(ok["plan"]), cut_layer=_first(ok["cut_layer"]),
                          link_pattern=_first(ok["link_pattern"]))
            record["step_times"], record["images_per_step"] = _launch_steps(ok)
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


def _beside_every_setting(df, keys):
    """``df`` with each row of a strategy that does not use a setting of ``USED_BY`` repeated for
    every value that setting takes among the rows of its (model, workers) that use it."""
    for key, uses in USED_BY.items():
        if key not in keys or df.empty:
            continue
        using = df["strategy"].map(uses).astype(bool)
        if not using.any():
            continue
        values = df[using].groupby(["model", "workers"])[key].unique()
        index, settings = [], []
        for i, row in df[~using].iterrows():
            present = values.get((row["model"], row["workers"]))
            for v in ([row[key]] if present is None else present):
                index.append(i)
                settings.append(v)
        others = df.loc[index].copy()
        others[key] = settings
        df = pd.concat([df[using], others], ignore_index=True)
    return df


def _launch_steps(rows):
    """(step lists, images per step): the ok rows' timed steps, one list per row (a row is one
    launch), and the images one step trains (a row's images/sec x its mean step time:
    tf_cnn_benchmarks' images/sec is images over the timed steps' time); (None, None) when a
    row kept no steps (ps-async times chunks of steps; rows written before steps were kept)."""
    if "step_times_s" not in rows:
        return None, None
    parts = [parse_steps(text) for text in rows["step_times_s"]]
    if any(p is None for p in parts):
        return None, None
    rates = pd.to_numeric(rows["images_per_sec"], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    per_step = rates * [p.mean() for p in parts]
    per_step = per_step[~np.isnan(per_step)]
    return [p.tolist() for p in parts], (float(np.median(per_step)) if per_step.size else None)


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


def interval_comparison(run_id, model, workers, strategy, results="results", **config):
    """For one cell of a stored run, the median images/sec with the interval the report printed
    before (every step of every repeat resampled as independent) beside the interval over
    launches, as lines of text: ``print(interval_comparison("20261203T092100Z-50a016",
    "alexnet_cifar", 2, "ralp"))``. ``config`` narrows the cell when the run varies other keys
    (``link_bps=1e9``, ``ps_placement="colocated"``, or strategy "ps-colocated")."""
    df = display_strategies(ResultStore(results).load([run_id], quiet=True))
    rows = df[(df["model"] == model) & (df["workers"] == workers) & (df["strategy"] == strategy)]
    for key, value in config.items():
        rows = rows[rows[key] == value]
    keys = config_keys(rows, include_run=False)
    cells = [c for _, c in summarize(rows, keys).iterrows()
             if c["status"] == "ok" and c["images_per_step"] is not None] if len(rows) else []
    if len(cells) != 1:
        raise UserError(f"run {run_id} has {len(cells)} ok cells with step times for {model}, {workers} "
                        f"workers, {strategy}" + (f" (they differ in {', '.join(keys)}: name one, e.g. "
                                                  f"{keys[0]}=...)" if keys else ""))
    cell = cells[0]
    rates = [cell["images_per_step"] / np.asarray(launch) for launch in cell["step_times"]]
    spread = launch_spread(rates)
    old = (float(np.median(np.concatenate(rates))), *pooled_interval(rates))
    return "\n".join([
        f"{run_id}: {model}, {workers} workers, {strategy}: {len(rates)} launches of "
        f"{', '.join(str(r.size) for r in rates)} timed steps",
        "  launch medians (images/sec): " + ", ".join(f"{np.median(r):.1f}" for r in rates),
        f"  before: median of pooled steps, steps resampled as independent: {_interval_text(*old)}",
        f"  now: mean of launch medians, interval over launches: {_interval_text(*launch_interval(rates))} "
        f"(variance from the {'launches' if spread.between else 'steps within launches'}, {spread.df} df)"])


def _interval_text(estimate, low, high):
    return f"{estimate:.1f} [{low:.1f}–{high:.1f}] (−{1 - low / estimate:.1%} +{high / estimate - 1:.1%})"
