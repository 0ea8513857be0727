"""`ralp-bench report`: Markdown/HTML/PNG report of stored runs, or a comparison of two runs.

Why the defaults: the question after a run is "what did it show", so with no flag the latest
run is reported. The report is a derived artefact, regenerated on each call into
``<results>/report/`` (override with --out); report.md says which runs it covers. The
Markdown goes to stdout so it can be pasted; the paths written go to stderr.
"""
import sys
from pathlib import Path

from bench.core.errors import UserError


def register(subparsers):
    p = subparsers.add_parser(
        "report", help="tables and plots of stored results (Markdown, HTML, PNG) or compare two runs",
        description="Report stored benchmark runs: a speedup table (Markdown on stdout and in "
                    "OUT/report.md), an HTML page OUT/index.html and PNG plots; or, with "
                    "--compare A B, images/sec of run B against run A.")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--latest", action="store_true", help="report the most recent run (default)")
    which.add_argument("--run", metavar="ID", action="append",
                       help="report this run (full id, unique prefix, 'latest' or 'previous'); repeatable")
    which.add_argument("--all", action="store_true", help="report every stored run")
    which.add_argument("--compare", nargs=2, metavar=("A", "B"),
                       help="compare run B against run A (ids as for --run)")
    p.add_argument("--results", default="results", metavar="DIR",
                   help="result store directory (default: results)")
    p.add_argument("--out", metavar="DIR", help="output directory (default: <results>/report)")
    p.add_argument("--threshold", type=float, default=0.10, metavar="FRACTION",
                   help="--compare marks a row faster/slower when images/sec change by more than "
                        "this fraction (default: 0.10)")
    p.set_defaults(func=run)


def run(args):
    from bench.report import document as report  # lazy: matplotlib loads only where a figure is drawn
    from bench.store.results import ResultStore  # lazy: pandas loads only where rows are read or written

    if not args.threshold > 0:
        raise UserError(f"--threshold must be a positive fraction such as 0.1, got {args.threshold}")
    store = ResultStore(args.results)
    everything = store.load()
    if everything.empty:
        pending = store.pending_run_ids()
        hint = f" (uncommitted rows of {', '.join(pending)} in {store.pending_dir})" if pending else ""
        raise UserError(f"no results yet in {store.root}{hint}: run `ralp-bench run ...` first")
    out_dir = Path(args.out) if args.out else store.root / "report"

    if args.compare:
        first, second = (store.resolve_run_id(r) for r in args.compare)
        frames = [everything[everything["run_id"] == r] for r in (first, second)]
        result, _ = report.compare(*frames, threshold=args.threshold)
        result.intro.insert(0, f"A = `{first}`, B = `{second}`.")
        text = report.to_markdown(result)
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "compare.md").write_text(text, encoding="utf-8")
        print(text)
        print(f"ralp-bench: wrote {out_dir / 'compare.md'}", file=sys.stderr)
        return 0

    if args.all:
        selected = everything
    else:
        run_ids = [store.resolve_run_id(r) for r in args.run] if args.run else [store.latest_run_id()]
        selected = everything[everything["run_id"].isin(run_ids)]
    text = report.write_report(selected.reset_index(drop=True), out_dir)
    print(text)
    print(f"ralp-bench: wrote {out_dir / 'report.md'} and {out_dir / 'index.html'}", file=sys.stderr)
    return 0
