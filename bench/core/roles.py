"""Who does what, derived from MPI ranks.

TensorFlow cluster layout (strategies ps, ps-async, ralp), world = 1 + S + W:
    rank 0          chief: the client that builds the graph and drives the steps
                    (place it on the PS host: it sends only small control RPCs)
    ranks 1..S      ps tasks (variables; for ralp also the FC head)
    ranks S+1..S+W  worker tasks
Colocated sync PS (--ps-placement colocated), S = W, world = 1 + 2W:
    rank 0          chief
    ranks 1+2i      ps task i   } on worker host i: ranks fill hosts in order, so
    ranks 2+2i      worker i    } each worker shares its host with one PS task
Workers-only layout (horovod), world = W: every rank is a worker.
One-process reference (single), world = 1: one worker, on the first worker host.
A horovod run may also be launched in the TF layout (``auto`` must be able to
pick any plan inside one launch); ranks 0..S then sit the run out.
"""
from dataclasses import dataclass
from typing import Optional

from bench.core.errors import UserError
from bench.core.strategy_specs import spec_of


@dataclass(frozen=True)
class Role:
    job: str      # "chief" | "ps" | "worker"
    index: int    # task index within the job

    def __str__(self):
        return f"{self.job} {self.index}"


def tf_world_size(workers: int, ps: int) -> int:
    return 1 + ps + workers


def role_of(rank: int, world: int, workers: int, ps: int, colocated: bool = False) -> Role:
    if colocated and world == tf_world_size(workers, workers) and ps == workers:
        if rank == 0:
            return Role("chief", 0)
        return Role("ps" if rank % 2 else "worker", (rank - 1) // 2)
    if world == workers and world != tf_world_size(workers, ps):
        return Role("worker", rank)
    if world != tf_world_size(workers, ps):
        raise UserError(
            f"launched with {world} ranks, but {workers} workers and {ps} PS need {tf_world_size(workers, ps)} "
            f"(1 chief + {ps} ps + {workers} workers; horovod alone: {workers}); fix mpirun -np")
    if rank == 0:
        return Role("chief", 0)
    if rank <= ps:
        return Role("ps", rank - 1)
    return Role("worker", rank - 1 - ps)


@dataclass(frozen=True)
class RankLayout:
    """Which rank does what in one launch: what launchers place, ranks obey and error
    messages name. ``ps`` counts PS tasks (W when colocated)."""
    workers: int
    ps: int
    tf: bool = True            # chief + ps + workers; False: workers only (horovod)
    colocated: bool = False    # one PS task beside each worker (sync PS, tf_cnn_benchmarks' layout)

    @classmethod
    def for_run(cls, cfg, strategy: str) -> "RankLayout":
        """The layout ``strategy`` runs ``cfg`` in (``cfg`` is a RunConfig). The one-process
        reference is one worker on the first worker host."""
        layout = spec_of(strategy).layout
        if layout == "single":
            return cls(1, cfg.ps, tf=False)
        return cls(cfg.workers, cfg.ps_tasks(strategy), layout == "tf", cfg.colocated(strategy))

    @property
    def world(self) -> int:
        return tf_world_size(self.workers, self.ps) if self.tf else self.workers

    def role(self, rank: int) -> Role:
        return role_of(rank, self.world, self.workers, self.ps, self.colocated)

    def describe(self, rank: int) -> str:
        """'rank 3 (worker 1)', for error messages about a rank that died."""
        return describe_rank(rank, self.world, self.workers, self.ps, self.colocated)

    def rank_of(self, job: str, index: int) -> Optional[int]:
        """The rank that holds task ``index`` of ``job`` (TensorFlow's own name for a rank, which
        its errors use), or None where this layout has no such task."""
        return next((rank for rank in range(self.world) if self.role(rank) == Role(job, index)), None)


def describe_rank(rank: int, world: int, workers: int, ps: int, colocated: bool = False) -> str:
    """'rank 3 (worker 1)', for error messages about a rank that died."""
    try:
        return f"rank {rank} ({role_of(rank, world, workers, ps, colocated)})"
    except UserError:
        return f"rank {rank}"
