"""Run configurations through a launcher and turn what ranks report into result rows.

Data flows one way: RunConfig -> plan (analyzer) -> launch (mpirun) -> rank 0's
JSON (RALP-RESULT lines in mpirun's output: the driver need not share a
filesystem with any rank) -> row (measured figures beside the cost model's). A
configuration that fails becomes a row with status "failed" and the reason, never a dropped row.
"""
import json
import sys
from dataclasses import replace
from typing import Callable, Dict, List, Optional

import numpy as np

from bench.core.config import NUMBERS_OR_AUTO, RunConfig
from bench.core.errors import RunFailed, UserError, one_line, traceback_to_log
from bench.core.horovod_settings import settings_label
from bench.core.roles import RankLayout
from bench.core.stats import interleaved
from bench.core.strategy_specs import AUTO, spec_of
from bench.driver.planning import (bound, check_head_shards, check_hierarchical, predict, priced, priced_with, pricing,
                                   resolve)
from bench.launch import processes
from bench.launch.base import Launcher, run_mpirun
from bench.launch.cpu_steal import cpu_times, steal_share
from bench.rank.result import RankResult, ResultReceiver


def rank_argv(cfg: RunConfig, strategy: str, out: Optional[str] = None) -> List[str]:
    """The flags of ``python -m bench.run`` for ``cfg``: every rank setting (RunConfig.rank_fields),
    so a new setting reaches the ranks without a list to keep in step. Without ``out`` rank 0
    sends its result in its output (what run_one reads)."""
    argv = ["--strategy", strategy] + (["--out", out] if out else [])
    for name in RunConfig.rank_fields():
        value = getattr(cfg, name)
        if isinstance(value, bool):
            argv += ["--" + name.replace("_", "-")] if value else []
        elif value is not None:
            argv += ["--" + name.replace("_", "-"), str(value)]
    return argv


def deadline_for(cfg: RunConfig) -> float:
    """Start-up (TF import, rendezvous, tracing, a broadcast of the model) plus every step at its
    timeout."""
    evals = (cfg.steps // cfg.eval_every + 1) if cfg.eval_every else 0
    return 240.0 + cfg.broadcast_window_s + cfg.step_timeout * (cfg.warmup_steps + cfg.step_limit + evals)


def run_one(cfg: RunConfig, launcher: Launcher, on_progress: Optional[Callable] = None,
            echo: bool = False) -> Dict:
    """Launch one configuration; return a complete result row (status ok or failed)."""
    from bench.store.results import new_row, utc_now_iso  # lazy: pandas loads only where rows are read or written

    row = new_row(**launcher.cluster_fields(), **_config_fields(cfg), started_at=utc_now_iso())
    try:
        plan = resolve(cfg)
        check_head_shards(cfg, plan.strategy, plan.cut)
        check_hierarchical(cfg.horovod_hierarchical, plan.strategy)
    except UserError as exc:  # an analyzer error is this row's failure, not the sweep's
        return {**row, "status": "failed", "failure": f"planning failed: {one_line(str(exc))}"}
    except Exception as exc:  # a bug of ours: the row says where its traceback is
        log = traceback_to_log(exc, f"planning-{cfg.strategy}")
        return {**row, "status": "failed",
                "failure": f"planning failed: {one_line(f'{type(exc).__name__}: {exc}')}; traceback in {log}"}
    strategy, cut = plan.strategy, plan.cut
    picked_codec = cfg.compression == "auto"
    row.update(plan=strategy + (f"+{plan.compression}" if picked_codec else ""), cut_layer=cut,
               **{name: getattr(plan, name) for name in NUMBERS_OR_AUTO})
    pattern = spec_of(strategy).pattern_for(cfg.ps_placement)
    layout = RankLayout.for_run(cfg, strategy)
    probe_floats = launcher.in_run_link_probe(pattern, layout) if _carries_link_probe(cfg, strategy) else None
    if probe_floats is None:
        row.update(launcher.link_fields(pattern))
    if strategy == "horovod":
        row["horovod_settings"] = settings_label(cfg.horovod_ops, cfg.horovod_fusion_mb, cfg.horovod_cycle_ms,
                                                 cfg.horovod_autotune, cfg.horovod_hierarchical)
    cfg = plan.applied_to(cfg)  # ranks and predictions get the concrete codec, micro-batches and buckets
    received = ResultReceiver()
    try:
        spec = launcher.spec(layout, rank_argv(replace(cfg, cut=cut, link_probe_floats=probe_floats), strategy))
        times_before = cpu_times()
        run_mpirun(spec, timeout_s=deadline_for(cfg), layout=layout, on_progress=on_progress, echo=echo,
                   result=received, log_label=f"{cfg.model}-{strategy}-w{cfg.workers}")
        result = RankResult.from_json(received.text())
        row["cpu_steal"] = steal_share(times_before, cpu_times())
    except RunFailed as exc:
        return {**row, **_predicted(cfg, strategy, cut), "status": "failed", "failure": str(exc)}
    finally:
        launcher.after_run()
    if probe_floats is not None:  # a failed run measured nothing: the next run that can carries the check
        row.update(launcher.link_fields(pattern, in_run=result.link_probe))
    return {**row, **_predicted(cfg, strategy, cut), **measured_fields(cfg, result), "status": "ok",
            "failure": None}


def _carries_link_probe(cfg: RunConfig, strategy: str) -> bool:
    """Can a run of ``strategy`` make the link check's all-reduce in its own ranks? Horovod on the
    transport the separate probe measures (Gloo, flat, untuned by its autotuner, which would learn
    from the probe's cycles)."""
    return (strategy == "horovod" and cfg.horovod_ops == "gloo" and not cfg.horovod_autotune
            and not cfg.horovod_hierarchical)


def failed_row(cfg: RunConfig, reason: str, cluster_fields: Optional[Dict] = None) -> Dict:
    """A configuration that could not run is recorded, not dropped."""
    from bench.store.results import new_row  # lazy: pandas loads only where rows are read or written

    return new_row(**(cluster_fields or {}), **_config_fields(cfg), status="failed", failure=reason)


def _config_fields(cfg: RunConfig) -> Dict:
    """The row's config columns: the settings RunConfig marks for the row, and the global batch."""
    fields = {column: getattr(cfg, name) for name, column in RunConfig.row_fields()}
    fields.update({name: None for name in NUMBERS_OR_AUTO if fields[name] == AUTO})  # the plan's, once resolved
    return {**fields, "global_batch": cfg.global_batch}


def _predicted(cfg: RunConfig, strategy: str, cut: Optional[str]) -> Dict:
    """The cost model's columns of the row: its prediction, and the plan's bound (the least step
    time the plan allows on this hardware: bench/driver/planning.py ``bound``). A configuration it cannot
    price (or whose calibration failed) keeps its measurement, and the reason is said on stderr: a
    row silently without a prediction hid a broken calibration once (issue 33)."""
    if not priced(strategy):
        return {}
    try:
        inputs = pricing(cfg)  # once: the prediction, the bound and the row's priced_with read the same
        p = predict(cfg, strategy, cut, inputs=inputs)
        least = bound(cfg, strategy, cut, inputs=inputs)
    except UserError as exc:
        print(f"ralp-bench: warning: no prediction for {cfg.model} {strategy}: {one_line(exc)}", file=sys.stderr)
        return {}
    return {"predicted_step_time_s": p.step_time_s, "bound_step_time_s": least, "priced_with": priced_with(inputs),
            # per worker host, as measured: k workers of a host share its NIC (k = 1: per worker)
            "bytes_worker_predicted": p.host_tx_bytes + p.host_rx_bytes,
            "bytes_ps_predicted": ((p.ps_tx_bytes + p.ps_rx_bytes)
                                   if RankLayout.for_run(cfg, strategy).tf and not cfg.colocated(strategy) else None)}


def measured_fields(cfg: RunConfig, result: RankResult) -> Dict:
    """Images/sec as tf_cnn_benchmarks reports it (total images / total timed
    time), step-time percentiles, and per-step bytes per PS host and per worker host."""
    times = np.asarray(result.step_times, dtype=float)
    steps = max(1, result.timed_steps)
    per_host = {h: (tx + rx) / steps for h, (tx, rx) in result.bytes_by_host.items()}

    def mean_over(hosts):
        values = [per_host[h] for h in hosts if h in per_host]
        return float(np.mean(values)) if values else None

    colocated = cfg.colocated(result.plan)  # a PS task on every worker host: no PS host of its own
    worker_hosts = [h for h in result.worker_hosts if colocated or h not in result.ps_hosts]
    per_step = result.per_step_timing
    images = cfg.images_per_step(result.plan or cfg.strategy)
    return {
        "images_per_sec": images * len(times) / float(times.sum()) if times.sum() > 0 else None,
        "step_time_median_s": float(np.median(times)),
        "timed_steps": int(len(times)),
        "step_time_p10_s": float(np.percentile(times, 10)) if per_step else None,
        "step_time_p90_s": float(np.percentile(times, 90)) if per_step else None,
        "bytes_ps_measured": None if colocated else mean_over(result.ps_hosts),
        "bytes_worker_measured": mean_over(worker_hosts),
        "accuracy": result.final_accuracy,
        "steps_to_accuracy": result.steps_to_accuracy,
        "time_to_accuracy_s": result.time_to_accuracy_s,
        "final_loss": result.losses[-1] if result.losses else None,
        # Only real per-step times: ps-async times chunks of steps, so its "steps" are equal
        # averages and would make a zero-width interval.
        "step_times_s": json.dumps([round(float(t), 6) for t in times]) if per_step else None,
        **tcp_health(result.tcp_by_host or {}),
    }


def tcp_health(tcp_by_host: Dict) -> Dict:
    """The busiest host's share of retransmitted TCP segments over the timed steps, and the
    retransmission timeouts of all hosts (kernel counters of each host's network namespace)."""
    shares = [retrans / sent for sent, retrans, _ in tcp_by_host.values() if sent > 0]
    if not shares:
        return {}
    return {"tcp_retransmit_max": max(shares),
            "tcp_timeouts": sum(timeouts for _, _, timeouts in tcp_by_host.values())}


def run_many(configs: List[RunConfig], launcher: Launcher, progress=None, echo: bool = False,
             repeats: int = 1) -> List[Dict]:
    """Every configuration ``repeats`` times, interleaved (A B C A B C): drift over the run
    (a noisy neighbour, a warming machine) then hits every strategy alike."""
    rows = []
    for index, cfg in enumerate(interleaved(configs, repeats)):
        processes.raise_if_interrupted()  # one the last configuration's start dropped (processes.interrupted)
        row = run_one(cfg, launcher, on_progress=progress.callback(cfg) if progress else None, echo=echo)
        rows.append({**row, "repeat": index // max(1, len(configs))})
        if progress:
            progress.finished(cfg, rows[-1])
    return rows
