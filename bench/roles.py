"""Who does what, derived from MPI ranks.

TensorFlow cluster layout (strategies ps, ps-async, ralp), world = 1 + S + W:
    rank 0          chief: the client that builds the graph and drives the steps
                    (place it on the PS host: it sends only small control RPCs)
    ranks 1..S      ps tasks (variables; for ralp also the FC head)
    ranks S+1..S+W  worker tasks
Workers-only layout (horovod), world = W: every rank is a worker.
A horovod run may also be launched in the TF layout (``auto`` must be able to
pick any plan inside one launch); ranks 0..S then sit the run out.
"""
from dataclasses import dataclass

from bench.errors import UserError


@dataclass(frozen=True)
class Role:
    job: str      # "chief" | "ps" | "worker"
    index: int    # task index within the job

    def __str__(self):
        return f"{self.job} {self.index}"


def tf_world_size(workers: int, ps: int) -> int:
    return 1 + ps + workers


def world_size(strategy: str, workers: int, ps: int) -> int:
    return workers if strategy == "horovod" else tf_world_size(workers, ps)


def role_of(rank: int, world: int, workers: int, ps: int) -> Role:
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


def describe_rank(rank: int, world: int, workers: int, ps: int) -> str:
    """'rank 3 (worker 1)', for error messages about a rank that died."""
    try:
        return f"rank {rank} ({role_of(rank, world, workers, ps)})"
    except UserError:
        return f"rank {rank}"
