"""What every MPI rank runs: ``mpirun -np N python -m bench.run --model ... --strategy ...``.

``ralp-bench run`` builds this command line for you; on a real cluster you
can run it under your own ``mpirun -H host1,host2,...``. Roles come from
ranks (bench/core/roles.py): rank 0 is the chief/client and should sit on the PS
host, ranks 1..S are PS tasks, the rest workers; horovod needs only W ranks.
Rank 0 writes the result JSON to ``--out FILE`` on rank 0's own host (as ``--dump-weights``
does its .npz); without ``--out`` it prints the result as RALP-RESULT lines, which mpirun
brings back to wherever mpirun runs: what ``ralp-bench run`` reads (bench/rank/result.py).
"""
import argparse
import os
import sys
import traceback
from socket import gethostname

from bench.core.config import RunConfig, add_run_arguments, add_setting_arguments
from bench.core.errors import UserError
from bench.data import load_dataset, shard
from bench.driver.planning import resolve
from bench.models.build import settled_spec
from bench.models.sources import check_digest
from bench.rank import main as rank_main
from bench.rank import scratch
from strategies.base import Shards


def parse(argv):
    p = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.splitlines()[0])
    add_run_arguments(p)
    add_setting_arguments(p, "rank")  # --out, --dump-weights, --cpus-per-host
    cfg = RunConfig.from_args(p.parse_args(argv)).validate()

    check_digest(cfg.model_spec(), cfg.model_sha256, gethostname())  # the driver's file, on every host
    return cfg


def load_shards(cfg: RunConfig):
    spec = settled_spec(cfg.model_spec(), check=False)  # builds only when the driver did not say
    ds = load_dataset(cfg.dataset, data_dir=cfg.data_dir, seed=cfg.seed, input_shape=spec.input_shape,
                      num_classes=spec.num_classes, synthetic_size=max(256, 2 * cfg.global_batch))
    pieces = [shard(ds.train_x, ds.train_y, w, cfg.workers, cfg.seed) for w in range(cfg.workers)]
    if len(pieces[0][1]) < cfg.batch_size:
        raise UserError(f"{cfg.dataset} gives each of {cfg.workers} workers {len(pieces[0][1])} images, fewer "
                        f"than --batch-size {cfg.batch_size}; lower the batch size or the worker count")
    return Shards([p[0] for p in pieces], [p[1] for p in pieces], ds.eval_x, ds.eval_y)


def main(argv=None):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    scratch.enter()  # before anything is traced: autograph's files go there (bench/rank/scratch.py)
    try:
        cfg = parse(argv)
        return rank_main.run_rank(cfg, resolve, load_shards)
    except UserError as exc:
        print(f"ralp-bench: error: {exc}", file=sys.stderr, flush=True)
        _abort(exc.exit_code)
    except Exception:  # noqa: BLE001 - any rank's failure must end the job, as `python -m mpi4py` does
        # Left to Python, the failed rank would wait in mpi4py's MPI_Finalize at exit for ranks
        # that wait for it (measured on ssh hosts: a strategy failing in setup hung the run
        # until its deadline); its traceback goes to mpirun's output first, for the log.

        traceback.print_exc()
        sys.stderr.flush()
        _abort(1)


def _abort(code):
    """One rank's error must end every rank, not leave them waiting."""
    scratch.remove()
    try:
        from mpi4py import MPI

        if MPI.COMM_WORLD.Get_size() > 1:
            MPI.COMM_WORLD.Abort(code)
    except ImportError:
        pass
    sys.exit(code)


if __name__ == "__main__":
    sys.exit(main())
