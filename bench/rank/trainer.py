"""The timed training loop every strategy runs through.

It owns what must be identical across strategies: warm-up steps excluded,
per-step wall time, NIC counters sampled around the timed steps only (and
around each evaluation, whose traffic is subtracted), held-out evaluation
every N steps, and the stop rule for --train-to-accuracy. Time-to-accuracy
counts training time only, not evaluation time.
"""
import os
import sys
import threading
import time
from typing import Dict, Optional

import numpy as np

from bench.core.config import RunConfig
from bench.core.stats import precise_enough
from bench.rank import scratch
from bench.rank.result import RankResult
from bench.rank.tf_cluster import TrafficMeter, polite_allgather
from strategies.base import Strategy


class Watchdog:
    """Ends the whole MPI job if one step takes longer than --step-timeout."""

    def __init__(self, comm, timeout_s: float):
        self.comm, self.timeout_s = comm, timeout_s
        self.deadline: Optional[float] = None
        self.what = ""
        threading.Thread(target=self._watch, daemon=True).start()

    def arm(self, what: str, timeout_s: Optional[float] = None):
        self.limit_s = timeout_s or self.timeout_s
        self.what, self.deadline = what, time.monotonic() + self.limit_s

    def disarm(self):
        self.deadline = None

    def _watch(self):
        while True:
            time.sleep(0.5)
            if self.deadline is not None and time.monotonic() > self.deadline:
                print(f"ralp-bench: error: {self.what} exceeded its {self.limit_s:g}s limit; "
                      f"a rank is hung or too slow (raise --step-timeout)", file=sys.stderr, flush=True)
                scratch.remove()
                threading.Timer(15.0, os._exit, (5,)).start()  # if MPI_Abort itself hangs
                self.comm.Abort(5)


def report_progress(done: int, total: int, enabled: bool):
    if enabled:
        print(f"RALP-PROGRESS {done} {total}", flush=True)


def _agreement(meter: TrafficMeter, leader: bool, lockstep: bool):
    """How ranks that each run this loop (Horovod's workers) agree to stop: the leader's view
    of its step times decides, shared over MPI between steps (outside the timed region). An
    in-graph chief trains alone and decides alone."""
    if not lockstep or meter.comm.Get_size() == 1:  # (single: one rank)
        return lambda stop: stop

    def agree(stop: bool) -> bool:
        return any(s for is_leader, s in polite_allgather(meter.comm, (leader, stop)) if is_leader)

    return agree


def train(strategy: Strategy, cfg: RunConfig, meter: TrafficMeter, watchdog: Watchdog,
          leader: bool, lockstep: bool = False) -> RankResult:
    """Set up, warm up, time steps (until --steps, or --target-ci's precision), evaluate, and
    return the rank-0 result (``lockstep``: every rank runs this loop, as in the workers layout). Long because the timed loop and what it measures must be read
    together: a step's timing, its traffic sample and its evaluation pause share the loop."""
    total = cfg.warmup_steps + cfg.step_limit
    t0 = time.perf_counter()
    watchdog.arm("setup", timeout_s=cfg.setup_window_s)
    strategy.setup()
    setup_s = time.perf_counter() - t0
    if cfg.warmup_steps:
        watchdog.arm("warm-up", timeout_s=cfg.warmup_window_s)
        strategy.train_steps(0, cfg.warmup_steps)
    report_progress(cfg.warmup_steps, total, leader)

    excluded: Dict[str, np.ndarray] = {}
    step_times, losses, evals = [], [], []
    reached_at = None
    before = meter.sample()
    step = cfg.warmup_steps
    chunk = 1 if strategy.per_step_timing else (cfg.eval_every or cfg.steps)
    agree = _agreement(meter, leader, lockstep) if cfg.target_ci is not None else (lambda stop: stop)
    while step < total and reached_at is None and not agree(
            precise_enough(step_times, cfg.steps, cfg.target_ci, float(np.sum(step_times)), cfg.time_cap)):
        n = min(chunk, total - step)
        watchdog.arm(f"step {step}", timeout_s=cfg.step_timeout * n)
        start = time.perf_counter()
        losses += strategy.train_steps(step, n)
        elapsed = time.perf_counter() - start
        step_times += [elapsed / n] * n
        step += n
        report_progress(step, total, leader)
        timed = step - cfg.warmup_steps
        if cfg.eval_every and (timed % cfg.eval_every == 0 or step == total):
            watchdog.arm(f"evaluation after step {step}", timeout_s=max(60.0, cfg.step_timeout))
            pause = meter.sample()
            accuracy = strategy.evaluate()
            for host, counts in TrafficMeter.delta(pause, meter.sample()).items():
                excluded[host] = excluded.get(host, np.zeros(len(counts))) + counts
            evals.append({"step": timed, "accuracy": accuracy, "train_time_s": float(np.sum(step_times)),
                          "loss": losses[-1]})
            if cfg.train_to_accuracy is not None and accuracy >= cfg.train_to_accuracy:
                reached_at = evals[-1]
    after = meter.sample()
    watchdog.disarm()

    timed = {h: [int(v) for v in np.asarray(counts) - excluded.get(h, 0)]
             for h, counts in TrafficMeter.delta(before, after).items()}
    bytes_by_host = {h: counts[:2] for h, counts in timed.items()}
    tcp_by_host = {h: counts[2:5] for h, counts in timed.items() if len(counts) >= 5}
    timed_steps = len(step_times)
    described = strategy.describe()
    return RankResult(
        plan=described["plan"], cut_layer=described.get("cut_layer"),
        timed_steps=timed_steps, step_times=step_times, per_step_timing=strategy.per_step_timing,
        losses=losses, evals=evals, setup_s=setup_s, train_time_s=float(np.sum(step_times)),
        bytes_by_host=bytes_by_host, tcp_by_host=tcp_by_host, bytes_by_source=meter.by_source(timed),
        final_accuracy=evals[-1]["accuracy"] if evals else None,
        steps_to_accuracy=reached_at["step"] if reached_at else None,
        time_to_accuracy_s=reached_at["train_time_s"] if reached_at else None)
