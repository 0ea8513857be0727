"""`ralp-bench run`: the same model under several strategies, on equal terms, one table.

Cluster: ``--cluster emulated`` (namespaces + tc, the default where root and
namespaces are available), ``local`` (loopback: no link shaping, no per-host
bytes) or ``hosts --hostfile F`` (a real cluster through mpirun).
"""
import argparse
import sys

from bench.commands.help_examples import examples
from bench.core.config import RunConfig, add_run_arguments, add_setting_arguments, check_repeats
from bench.core.errors import UserError
from bench.data import validate_data
from bench.driver.clusters import apply_cluster, make_launcher
from bench.driver.harness import run_many
from bench.driver.planning import check_cut, check_head_shards, check_hierarchical, settle_model
from bench.driver.progress import RunProgress


def register(subparsers):
    p = subparsers.add_parser("run", help="run strategies side by side and record result rows",
                              formatter_class=argparse.RawDescriptionHelpFormatter, epilog=examples(
                                  "ralp-bench run --model alexnet_cifar --strategy ps,ps-async,horovod,ralp,auto --workers 2",
                                  "ralp-bench run --model examples/custom_cnn.py:build --strategy ps,horovod,ralp --dataset mnist"))
    add_run_arguments(p, multi_strategy=True)
    add_cluster_arguments(p)
    p.set_defaults(func=run)


def add_cluster_arguments(p):
    p.add_argument("--cluster", default="auto", choices=["auto", "emulated", "local", "hosts", "slurm"],
                   help="where ranks run (default: the allocation inside a Slurm job, else emulated when "
                        "possible, else local); slurm: the nodes of this Slurm job (sbatch, salloc)")
    add_setting_arguments(p, "cluster")  # --ps-bandwidth, --latency, --cpus-per-host (RunConfig's)
    p.add_argument("--hostfile", default=None, help="--cluster hosts: Open MPI hostfile ('node slots=N')")
    p.add_argument("--env", action="append", default=None, metavar="NAME[=VALUE]",
                   help="--cluster hosts/slurm: also forward this variable to every rank (NAME alone: its value here); "
                        "repeatable. Forwarded anyway when set: PATH, LD_LIBRARY_PATH, PYTHONPATH, NCCL_*, CUDA_*, "
                        "HOROVOD_*, UCX_*, RALP_*; rows record the names, never the values")
    p.add_argument("--mpirun-arg", action="append", default=None, metavar="ARG",
                   help="--cluster hosts/slurm: extra mpirun words, split as a shell would, repeatable; a value that "
                        "starts with - needs '=': --mpirun-arg=\"--mca plm_rsh_agent 'ssh -F cfg'\"")
    p.add_argument("--no-firewall", action="store_true",
                   help="--cluster hosts/slurm: no per-run nftables rules (as root they accept the run's ports only "
                        "from the cluster's addresses while it goes)")
    p.add_argument("--scale-to", default=None,
                   help="emulated: set link rates so this machine's compute/network ratio matches a preset")
    p.add_argument("--no-link-check", action="store_true",
                   help="emulated: skip measuring the link efficiency of each strategy's traffic pattern")
    p.add_argument("--repeats", type=int, default=None,
                   help="run every configuration N times, interleaved (A B C A B C) so drift hits all alike")
    p.add_argument("--results", default="results", help="result store directory (default results/)")
    p.add_argument("--no-store", action="store_true", help="do not record rows in the result store")
    p.add_argument("--quiet", action="store_true", help="plain progress lines (CI)")
    p.add_argument("--verbose", action="store_true", help="echo every rank's output")


def configs_from_args(args):
    base = RunConfig.from_args(args)
    strategies = [s.strip() for s in base.strategy.split(",") if s.strip()]
    if not strategies:
        raise UserError("--strategy is empty; give e.g. ps,horovod,ralp")

    out = []
    for strategy in strategies:
        cfg = settle_model(RunConfig(**{**vars(base), "strategy": strategy}).validate())
        out.append(cfg)

    if base.cut:
        check_cut(out[0])  # before anything starts, not on the ranks
    for cfg in out:
        check_head_shards(cfg, cfg.strategy, cfg.cut)
        check_hierarchical(cfg.horovod_hierarchical, cfg.strategy)
    return out


def run(args):
    configs = configs_from_args(args)
    validate_data(configs[0].dataset, configs[0].data_dir)  # before any process starts

    launcher = make_launcher(args, configs[0].workers, configs[0].ps)
    launcher.measure_link()
    configs = [apply_cluster(cfg, launcher) for cfg in configs]

    repeats = check_repeats(args.repeats)
    progress = RunProgress(len(configs) * repeats, quiet=args.quiet)
    try:
        with launcher:
            rows = run_many(configs, launcher, progress=progress, echo=args.verbose, repeats=repeats)
    finally:
        progress.close()
    return publish(rows, args)[0]


def publish(rows, args):
    """Store the rows (unless --no-store), print the report for them.

    Returns (exit code: 3 if any configuration failed, run id, the stored rows)."""
    # lazy: pandas loads only where rows are read or written
    from bench.store.results import ResultStore, environment_fields, new_run_id

    env = environment_fields()
    run_id = new_run_id()
    rows = [{**row, **env, "run_id": run_id} for row in rows]
    if not args.no_store:
        ResultStore(args.results).write_run(rows, run_id=run_id)
    return print_summary(rows, run_id), run_id, rows


def print_summary(rows, run_id):
    """The speedup table on stdout, one error line per failed configuration; the exit code."""
    import pandas as pd  # lazy: pandas loads only where rows are read or written

    from bench.report.document import build_report, to_markdown  # lazy: matplotlib loads only where a figure is drawn

    print(to_markdown(build_report(pd.DataFrame(rows), title=f"ralp-bench run {run_id}")[0]))
    failed = [r for r in rows if r["status"] not in ("ok", "noisy")]  # noisy: measured again
    for r in failed:
        print(f"ralp-bench: error: {r['model']} {r['strategy']} x{r['workers']} failed: {r['failure']}",
              file=sys.stderr)
    return 3 if failed else 0
