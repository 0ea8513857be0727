"""`ralp-bench sweep FILE`: run a grid of configurations, store them as one run, report.

Points sharing a cluster (same workers, PS count and link settings) run on
one emulated cluster; a failed point becomes a failed row and the sweep goes
on. Each finished point is journaled at once (results/pending/<run>.jsonl), so
a sweep that is interrupted or dies keeps what it measured; ``--resume RUN``
runs only the points that run has no row for, then stores the whole run. At
the end the report (Markdown, HTML, PNGs) is written next to the store.
"""
import argparse
import sys
from itertools import groupby
from pathlib import Path

from bench.commands.help_examples import examples
from bench.commands.run import add_cluster_arguments, print_summary
from bench.core.errors import UserError
from bench.data import validate_data
from bench.driver.clusters import apply_cluster, make_launcher
from bench.driver.harness import failed_row, run_one
from bench.driver.planning import predict, resolve, settle_model
from bench.driver.progress import RunProgress
from bench.driver.sweep import load_sweep
from bench.launch.cpu_steal import STEAL_TRIES, measure_quietly

# A journaled row written before rows carried their sweep point (``sweep_point``) stands for the point
# with the same values of these fields (the Horovod knobs are not among them: such journals cannot tell
# points apart that differ only there).
LEGACY_POINT_FIELDS = ("model", "dataset", "batch_size", "micro_batches", "hybrid_bucket_mb", "workers", "ps",
                       "ps_placement", "strategy", "compression", "steps", "warmup_steps", "target_accuracy",
                       "cluster_mode", "link_bps", "ps_link_bps", "scaled_to", "cpus_per_host", "repeat")


def register(subparsers):
    p = subparsers.add_parser("sweep", help="run a sweep file (grid of configurations) and report it",
                              formatter_class=argparse.RawDescriptionHelpFormatter, epilog=examples(
                                  "ralp-bench sweep sweeps/headline.toml --dry-run",
                                  "ralp-bench sweep sweeps/headline.toml"))
    p.add_argument("file", help="sweep definition (TOML), e.g. sweeps/main.toml (the shipped copy when there is no "
                                "such file here)")
    p.add_argument("--steps", type=int, default=None, help="override every point's timed steps")
    p.add_argument("--compression", default=None, help="override every point's codec")
    add_cluster_arguments(p)
    p.set_defaults(func=run, cluster=None, latency=None)
    p.add_argument("--bandwidth", default=None, help="override every point's link rate")
    p.add_argument("--report-dir", default=None, help="where to write the report (default RESULTS/report)")
    p.add_argument("--resume", default=None, metavar="RUN",
                   help="continue an interrupted sweep: run the points RUN has no row for, then store RUN")
    p.add_argument("--retry-failed", action="store_true",
                   help="with --resume: also run again the points whose row failed (the failed row stays in "
                        "the run; reports use the ok one)")
    p.add_argument("--max-steal", type=float, default=None, metavar="SHARE",
                   help="measure a point again (up to 3 times) when the hypervisor took more than this share of "
                        "the machine's CPU during it, e.g. 0.1 (default: the sweep file's max_steal, else no limit)")
    p.add_argument("--dry-run", action="store_true", help="list the points and exit")


def run(args):
    sweep = load_sweep(args.file, {"steps": args.steps, "compression": args.compression}, repeats=args.repeats,
                       max_steal=args.max_steal)
    if sweep.shipped_copy:
        print(f"ralp-bench: no {args.file} here; using the shipped {sweep.shipped_copy}", file=sys.stderr)
    for ds, data_dir in {(p.config.dataset, p.config.data_dir) for p in sweep.points}:
        validate_data(ds, data_dir)

    for point in sweep.points:  # a user's model is built and checked once, before anything runs
        point.config = settle_model(point.config)
    if args.dry_run:
        return _dry_run(sweep, args)
    journal = _Journal(args)
    print(f"sweep {sweep.name}: {len(sweep.points)} configurations"
          f"{f' x {sweep.repeats} repeats' if sweep.repeats > 1 else ''}, run {journal.run_id}"
          f"{f' ({len(journal.done)} already done)' if journal.done else ''}. {sweep.description}",
          file=sys.stderr)
    progress = RunProgress(len(sweep.points) * sweep.repeats, quiet=args.quiet)
    try:
        _run_points(sweep, args, journal, progress)
    except BaseException:
        progress.close()
        kept = [r for r in journal.rows if r.get("status") != "noisy"]
        if journal.rows:
            print(f"ralp-bench: sweep stopped; {len(kept)} finished configurations kept in "
                  f"{journal.path}; continue with: ralp-bench sweep {args.file} --resume {journal.run_id}",
                  file=sys.stderr)
        raise
    progress.close()
    return _publish(journal, args, sweep)


# Per run, before and after the timed steps: mpirun, TF's import on a host capped at a fraction of
# a core, the rendezvous, tracing the step (measured here: 20-35 s for the zoo's CIFAR models).
STARTUP_S = 30.0
CLUSTER_UP_S = 10.0  # bringing an emulated cluster up and probing its links, once per group


def _dry_run(sweep, args):
    """List the points with each one's predicted step and duration, and the sweep's total."""
    total = 0.0
    ordered = sorted(sweep.points, key=lambda p: p.cluster_key())
    for _, group in groupby(ordered, key=lambda p: p.cluster_key()):
        group = list(group)
        cluster_args = _cluster_args(args, group[0])
        launcher = make_launcher(cluster_args, group[0].config.workers, group[0].config.ps)
        total += CLUSTER_UP_S
        for point in group:
            cfg = apply_cluster(point.config, launcher)
            step = predicted_step_s(cfg)
            seconds = STARTUP_S + (cfg.warmup_steps + expected_steps(cfg, step)) * step if step else None
            total += (seconds or STARTUP_S) * sweep.repeats
            layout = " (colocated)" if cfg.colocated(cfg.strategy) else ""
            extra = "".join(f" {k}={getattr(cfg, k)}" for k in ("ps", "micro_batches") if getattr(cfg, k) != 1)
            print(f"{cfg.model} {cfg.strategy}{layout} workers={cfg.workers}{extra} {point.cluster}: "
                  + (f"step ~{step:.2f} s, at most ~{seconds / 60:.1f} min" if seconds else "no prediction"))
    runs = len(sweep.points) * sweep.repeats
    print(f"{runs} runs{f' ({sweep.repeats} repeats, interleaved)' if sweep.repeats > 1 else ''}; estimated at "
          f"most {total / 60:.0f} min (cost-model step times, {STARTUP_S:.0f} s start-up per run, the "
          "steps' upper bound under --target-ci/--time-cap"
          + (f"; not counted: points measured again under > {sweep.max_steal:.0%} CPU steal" if sweep.max_steal else "")
          + ")")
    return 0


def expected_steps(cfg, step_s: float) -> int:
    """Upper bound on the timed steps of ``cfg`` when each takes ``step_s``."""
    if cfg.target_ci is None:
        return cfg.steps
    if cfg.time_cap is not None and step_s > 0:
        return max(cfg.steps, min(cfg.step_limit, int(cfg.time_cap / step_s) + 1))
    return cfg.step_limit


def predicted_step_s(cfg):
    """The cost model's step time for what ``cfg`` will run (None when it has no model of it)."""
    try:
        plan = resolve(cfg)
        prediction = predict(plan.applied_to(cfg), plan.strategy, plan.cut)
        return prediction.step_time_s if prediction else None
    except Exception:  # an estimate only: the run itself reports what fails
        return None


def _run_points(sweep, args, journal, progress):
    ordered = sorted(sweep.points, key=lambda p: p.cluster_key())
    for _, group in groupby(ordered, key=lambda p: p.cluster_key()):
        group = list(group)
        cluster_args = _cluster_args(args, group[0])
        launcher = _launcher_or_failed_rows(cluster_args, group, journal, progress)
        if launcher is None:
            continue
        # each point's digest as asked, then its configuration as this cluster settles it
        settled = [(point.digest(), apply_cluster(point.config, launcher)) for point in group]
        todo = []
        # Repeats interleaved (A B C A B C), so drift over the sweep hits every point alike.
        for repeat in range(sweep.repeats):
            for digest, cfg in settled:
                if journal.has(digest, cfg, launcher.cluster_fields(), repeat):
                    progress.skipped(cfg)
                else:
                    todo.append((repeat, digest, cfg))
        if not todo:
            continue
        with launcher:
            for repeat, digest, cfg in todo:
                row = _measure(cfg, launcher, progress, args, repeat, sweep.max_steal, journal, digest)
                journal.add(row)
                progress.finished(cfg, row)


def _measure(cfg, launcher, progress, args, repeat, max_steal, journal, digest=None):
    """One point's row, measured again while its CPU steal exceeds ``max_steal``
    (bench/launch/cpu_steal.py); each superseded row is journaled with status "noisy", out of every median."""
    def superseded(row, steal, attempt):
        reason = f"cpu steal {steal:.0%} over max_steal {max_steal:.0%} (try {attempt} of {STEAL_TRIES})"
        journal.add({**row, "status": "noisy", "failure": reason})
        progress.note(cfg, f"{reason}: measuring again")

    row, _ = measure_quietly(
        lambda: {**run_one(cfg, launcher, on_progress=progress.callback(cfg), echo=args.verbose), "repeat": repeat,
                 "sweep_point": digest},
        max_steal, superseded, steal_of=lambda r: r.get("cpu_steal") if r["status"] == "ok" else None)
    return row


class _Journal:
    """The sweep's rows, journaled one by one into the result store's pending run."""

    def __init__(self, args):
        # lazy: pandas loads only where rows are read or written
        from bench.store.results import ResultStore, environment_fields, new_run_id

        self.store = None if args.no_store else ResultStore(args.results)
        self.env = environment_fields()
        self.rows, self.done = [], set()
        if getattr(args, "retry_failed", False) and not args.resume:
            raise UserError("--retry-failed goes with --resume RUN (the interrupted sweep to continue)")
        if args.resume:
            if self.store is None:
                raise UserError("--resume needs the result store; drop --no-store")
            if args.resume not in self.store.pending_run_ids():
                pending = ", ".join(self.store.pending_run_ids()) or "none"
                raise UserError(f"no interrupted sweep {args.resume!r} in {self.store.pending_dir} "
                                f"(pending runs: {pending})")
            self.run_id = args.resume
            self.done = {self.key(r) for r in self.store.read_pending(self.run_id)
                         if r.get("status") != "noisy"  # superseded: never stands for its point
                         and not (getattr(args, "retry_failed", False) and r.get("status") == "failed")}
        else:
            self.run_id = new_run_id()
        self.path = self.store.pending_dir / f"{self.run_id}.jsonl" if self.store else None

    @staticmethod
    def key(row):
        """The point and repeat a journaled row stands for: its ``sweep_point``, or in an older journal
        the values of LEGACY_POINT_FIELDS."""
        if row.get("sweep_point"):
            return row["sweep_point"], str(row.get("repeat"))
        return tuple(None if row.get(k) is None else str(row[k]) for k in LEGACY_POINT_FIELDS)

    def has(self, digest, cfg, cluster_fields, repeat=0):
        legacy = self.key({**failed_row(cfg, "", cluster_fields), "repeat": repeat})
        return (digest, str(repeat)) in self.done or legacy in self.done

    def add(self, row):
        row = {**row, **self.env, "run_id": self.run_id}
        self.rows.append(row)
        if self.store is not None:
            self.store.append_rows(self.run_id, [row])


def _cluster_args(args, point):
    """Command-line cluster flags beat the sweep file's, which beat the defaults."""
    merged = {"cluster": "auto", "bandwidth": None, "ps_bandwidth": None, "latency": "0", "scale_to": None,
              "hostfile": None, "network": None, "cpus_per_host": None,
              "no_link_check": getattr(args, "no_link_check", False)}
    merged.update({k: v for k, v in point.cluster.items()})
    for key in merged:
        value = getattr(args, key, None)
        if value is not None:
            merged[key] = value
    return argparse.Namespace(**merged)


def _launcher_or_failed_rows(cluster_args, group, journal, progress):
    try:
        launcher = make_launcher(cluster_args, group[0].config.workers, group[0].config.ps)
        launcher.measure_link()
        return launcher
    except UserError as exc:
        for point in group:
            journal.add(failed_row(point.config, f"cluster: {exc}"))
            progress.finished(point.config, journal.rows[-1])
        return None


def _publish(journal, args, sweep):
    import pandas as pd  # lazy: pandas loads only where rows are read or written

    from bench.report.document import write_report  # lazy: matplotlib loads only where a figure is drawn

    if journal.store is not None:
        journal.store.commit_run(journal.run_id)
        stored = journal.store.load([journal.run_id], quiet=True)
    else:
        stored = pd.DataFrame(journal.rows)
    code = print_summary(stored.to_dict("records"), journal.run_id)
    out = Path(args.report_dir or Path(args.results) / "report")
    write_report(stored, out, title=f"ralp-bench sweep {sweep.name}")
    print(f"report: {out / 'report.md'}, {out / 'index.html'} and PNGs in {out}", file=sys.stderr)
    return code
