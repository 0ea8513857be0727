"""`ralp-bench paper --run RUN_ID`: results/paper.md, one committed run held against the RALP paper.

Why a command and not a report flag: the document answers the paper's claims one by one
(bench/report/paper.py) and names the run it comes from, so it is regenerated from exactly one
committed run, never from "whatever is stored". A sweep of the paper's size runs across sessions, so
an unfinished run (rows journaled in results/pending/, not yet stored) may be published part-way
too: the document then says so in its first line, with how many rows it has and how to resume.
Claim (e), accuracy, is judged from a second run, on real data (--accuracy-run;
sweeps/paper-accuracy.toml). Claims (a) and (b) are judged again, beside the run's verdicts, on later
runs with plans the run predates (--plans-run; issue 35's bound sweeps), with the RALP family's best
plan in each cell standing for RALP. An unknown run id, or an accuracy run without accuracy rows, is one line, exit 2. The
Markdown goes to --out (default results/paper.md) with its two PNGs beside it; the path written
goes to stderr.
"""
import sys
from pathlib import Path
from bench.core.errors import UserError


def register(subparsers):
    p = subparsers.add_parser(
        "paper", help="the RALP paper's claims against one committed run (results/paper.md)",
        description="Write a Markdown document holding one committed run against the RALP paper's claims: a "
                    "verdict per claim, the speedup table, bytes per step against workers, scaling efficiency, "
                    "auto's picks and the cost model's extrapolation to 1,024 workers (two PNGs beside it).")
    p.add_argument("--run", required=True, metavar="ID",
                   help="the committed run (full id, unique prefix, 'latest' or 'previous'), or the full id of "
                        "an unfinished one (its journal in <results>/pending/)")
    p.add_argument("--accuracy-run", default=None, metavar="ID",
                   help="the committed run on real data that answers claim (e), accuracy (sweeps/paper-accuracy.toml; "
                        "default: the latest stored run with accuracy rows)")
    p.add_argument("--plans-run", action="append", default=[], metavar="ID",
                   help="a later run (committed, or the full id of an unfinished one) with plans the run predates (sweeps/bound-cifar.toml, "
                        "sweeps/bound-imagenet.toml): claims (a) and (b) are judged again on it with the RALP family's "
                        "best plan per cell, beside the run's verdicts; repeat for several (no model and worker "
                        "count in two of them)")
    p.add_argument("--results", default="results", metavar="DIR", help="result store directory (default: results)")
    p.add_argument("--out", default=None, metavar="FILE", help="where to write it (default: <results>/paper.md)")
    p.set_defaults(func=run)


def run(args):
    import pandas as pd  # lazy: pandas loads only where rows are read or written

    from bench.report import paper as paper_report  # lazy: pandas loads only where rows are read or written
    from bench.report.paper_accuracy import accuracy_run  # lazy: pandas loads only where rows are read or written
    from bench.store.results import ResultStore  # lazy: pandas loads only where rows are read or written

    store = ResultStore(args.results)
    everything = store.load(quiet=True)
    unfinished = args.run in store.pending_run_ids()
    if unfinished:
        run_id = args.run
        rows = pd.DataFrame(store.read_pending(run_id))
    else:
        run_id = store.resolve_run_id(args.run)  # UserError (exit 2) naming the stored runs
        rows = everything[everything["run_id"] == run_id].reset_index(drop=True)
    out = Path(args.out) if args.out else store.root / "paper.md"
    accuracy_id = store.resolve_run_id(args.accuracy_run) if args.accuracy_run else None
    accuracy = accuracy_run(everything, accuracy_id)
    if accuracy_id and not len(accuracy[1]):
        raise UserError(f"run {accuracy_id} has no accuracy rows; pass a run of sweeps/paper-accuracy.toml "
                        "to --accuracy-run (or leave it out)")
    plans = _plans(store, everything, args.plans_run)
    paper_report.write(rows, run_id, out, accuracy=accuracy, unfinished=unfinished, plans=plans)
    print(f"ralp-bench: wrote {out} (run {run_id}{', unfinished' if unfinished else ''})", file=sys.stderr)
    return 0


def _plans(store, everything, given):
    """(run ids, their rows, the unfinished ones) for --plans-run: committed runs, or the full id of one
    still being measured (its journal, as for --run); a model and worker count measured by two of them
    is refused (their calibrations differ, so their rows would not stand in one cell)."""
    import pandas as pd  # lazy: pandas loads only where rows are read or written

    pending = set(store.pending_run_ids())
    run_ids = list(dict.fromkeys(r if r in pending else store.resolve_run_id(r) for r in given))
    parts = [pd.DataFrame(store.read_pending(r)) if r in pending else everything[everything["run_id"] == r]
             for r in run_ids]
    seen = {}
    for run_id, mine in zip(run_ids, parts):
        for cell in sorted(set(zip(mine["model"], mine["workers"]))):
            if cell in seen:
                raise UserError(f"--plans-run {seen[cell]} and {run_id} both measured {cell[0]} at {int(cell[1])} "
                                "workers; pass one of them")
            seen[cell] = run_id
    rows = pd.concat(parts, ignore_index=True) if parts else everything.iloc[:0]
    return run_ids, rows, [r for r in run_ids if r in pending]
