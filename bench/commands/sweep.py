"""`ralp-bench sweep FILE`: run a grid of configurations, store them as one run, report.

Points sharing a cluster (same workers, PS count and link settings) run on
one emulated cluster; a failed point becomes a failed row and the sweep goes
on. At the end the report (Markdown, HTML, PNGs) is written next to the store.
"""
import argparse
import sys
from itertools import groupby


def register(subparsers):
    from bench.commands.run import add_cluster_arguments

    p = subparsers.add_parser("sweep", help="run a sweep file (grid of configurations) and report it")
    p.add_argument("file", help="sweep definition (TOML), e.g. sweeps/main.toml")
    p.add_argument("--steps", type=int, default=None, help="override every point's timed steps")
    p.add_argument("--compression", default=None, help="override every point's codec")
    add_cluster_arguments(p)
    p.set_defaults(func=run, cluster=None, latency=None)
    p.add_argument("--bandwidth", default=None, help="override every point's link rate")
    p.add_argument("--report-dir", default=None, help="where to write the report (default RESULTS/report)")
    p.add_argument("--dry-run", action="store_true", help="list the points and exit")


def run(args):
    from bench.data import validate_data
    from bench.harness import run_one
    from bench.progress import RunProgress
    from bench.sweep import load_sweep

    sweep = load_sweep(args.file, {"steps": args.steps, "compression": args.compression})
    for ds, data_dir in {(p.config.dataset, p.config.data_dir) for p in sweep.points}:
        validate_data(ds, data_dir)
    if args.dry_run:
        for p in sweep.points:
            print(f"{p.config.model} {p.config.strategy} workers={p.config.workers} {p.cluster}")
        return 0
    print(f"sweep {sweep.name}: {len(sweep.points)} configurations. {sweep.description}", file=sys.stderr)
    progress = RunProgress(len(sweep.points), quiet=args.quiet)
    rows = []
    try:
        ordered = sorted(sweep.points, key=lambda p: p.cluster_key())
        for _, group in groupby(ordered, key=lambda p: p.cluster_key()):
            group = list(group)
            cluster_args = _cluster_args(args, group[0])
            launcher = _launcher_or_failed_rows(cluster_args, group, rows, progress)
            if launcher is None:
                continue
            with launcher:
                for point in group:
                    point.config.bandwidth = cluster_args.bandwidth
                    row = run_one(point.config, launcher, on_progress=progress.callback(point.config),
                                  echo=args.verbose)
                    rows.append(row)
                    progress.finished(point.config, row)
    finally:
        progress.close()
    return _publish(rows, args, sweep)


def _cluster_args(args, point):
    """Command-line cluster flags beat the sweep file's, which beat the defaults."""
    merged = {"cluster": "auto", "bandwidth": None, "ps_bandwidth": None, "latency": "0", "scale_to": None,
              "hostfile": None, "network": None}
    merged.update({k: v for k, v in point.cluster.items()})
    for key in merged:
        value = getattr(args, key, None)
        if value is not None:
            merged[key] = value
    return argparse.Namespace(**merged)


def _launcher_or_failed_rows(cluster_args, group, rows, progress):
    from bench.commands.run import make_launcher
    from bench.errors import UserError
    from bench.harness import failed_row

    try:
        return make_launcher(cluster_args, group[0].config.workers, group[0].config.ps)
    except UserError as exc:
        for point in group:
            rows.append(failed_row(point.config, f"cluster: {exc}"))
            progress.finished(point.config, rows[-1])
        return None


def _publish(rows, args, sweep):
    from pathlib import Path

    import pandas as pd

    from bench.commands.run import publish
    from bench.report import write_report

    code, _, stored = publish(rows, args)
    df = pd.DataFrame(stored)
    out = Path(args.report_dir or Path(args.results) / "report")
    write_report(df, out, title=f"ralp-bench sweep {sweep.name}")
    print(f"report: {out / 'report.md'}, {out / 'index.html'} and PNGs in {out}", file=sys.stderr)
    return code
