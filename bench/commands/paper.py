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
    from bench.report import paper as paper_report  # lazy: pandas loads only where rows are read or written
    from bench.report.paper_accuracy import accuracy_run  # lazy: pandas loads only where rows are read or written
    from bench.store.results import ResultStore  # lazy: pandas loads only where rows are read or written

    store = ResultStore(args.results)
    everything = store.load(quiet=True)
    run_id, rows, unfinished = _run_rows(store, everything, args.run)
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


def _run_rows(store, everything, given):
    """(run id, its rows, unfinished?) for a committed run (full id, unique prefix, 'latest', 'previous'; an
    unknown one is a UserError naming the stored runs) or the full id of one still being measured (its journal)."""
    import pandas as pd  # lazy: pandas loads only where rows are read or written

    if given in store.pending_run_ids():
        return given, pd.DataFrame(store.read_pending(given)), True
    run_id = store.resolve_run_id(given)
    return run_id, everything[everything["run_id"] == run_id].reset_index(drop=True), False


def _plans(store, everything, given):
    """(run ids, their rows, the unfinished ones) for --plans-run, each read as --run is; a model and worker
    count measured by two of them is refused (their calibrations differ, so their rows would not stand in one
    cell)."""
    import pandas as pd  # lazy: pandas loads only where rows are read or written

    runs = {}
    for text in given:
        run_id, rows, unfinished = _run_rows(store, everything, text)
        runs.setdefault(run_id, (rows, unfinished))
    seen = {}
    for run_id, (mine, _) in runs.items():
        for cell in sorted(set(zip(mine["model"], mine["workers"]))):
            if cell in seen:
                raise UserError(f"--plans-run {seen[cell]} and {run_id} both measured {cell[0]} at {int(cell[1])} "
                                "workers; pass one of them")
            seen[cell] = run_id
    rows = pd.concat([r for r, _ in runs.values()], ignore_index=True) if runs else everything.iloc[:0]
    return list(runs), rows, [r for r, (_, unfinished) in runs.items() if unfinished]
