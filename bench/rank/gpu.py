"""Which GPU each rank uses, decided before TensorFlow touches a GPU; no TensorFlow here.

Why it is decided, not left to TensorFlow: every TF process maps every GPU it sees and, without
memory growth, nearly all of each one's memory; a ``tf.distribute.Server`` builds its devices
from its own ``ConfigProto``, not from the eager context's ``set_visible_devices``. So without a
choice, every task of a host lands on GPU 0 and the chief and PS tasks hold memory they never
use. The rule (issue 37):
- the ranks that compute (workers; PS tasks of a strategy that ``splits`` the model, which run
  its FC head there) take distinct GPUs, numbered in local-rank order among their host's
  computing ranks;
- the chief and every other PS task see no GPU;
- every process that sees a GPU grows its memory instead of mapping it all;
- a host without GPUs changes nothing: the CPU path stays as it was.
The ranks apply the choice: to the eager context in bench/rank/main.py (``_select_gpu``), to a
server through ``config_fields`` in bench/rank/tf_cluster.py (``start_server``).
"""
import os
from dataclasses import dataclass
from typing import List, Mapping, Optional, Sequence, Tuple

from bench.core.errors import UserError
from bench.core.roles import Role

# The launcher's own variable first: an mpirun started inside a Slurm allocation hands every rank
# the batch step's SLURM_LOCALID (0 for all), so Slurm's is trusted only when no MPI set its own.
# MV2: MVAPICH; PMIX/PMI: PMIx- and PMI-based launchers (srun --mpi=pmix, PRRTE, Hydra);
# MPI_LOCALRANKID: MPICH's and Intel MPI's Hydra.
LOCAL_RANK_VARIABLES = ("OMPI_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_RANK", "PMIX_LOCAL_RANK",
                        "PMI_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID")


@dataclass(frozen=True)
class GpuChoice:
    """One rank's share of its host's GPUs: ``index`` among the GPUs the host's processes may use
    (after CUDA_VISIBLE_DEVICES), or None for no GPU; ``host_gpus`` = 0 means a CPU host."""
    index: Optional[int]
    host_gpus: int

    @property
    def cpu_host(self) -> bool:
        return self.host_gpus == 0

    def config_fields(self) -> dict:
        """Keyword arguments for ``tf.compat.v1.ConfigProto`` that give a server this choice:
        {} on a CPU host (the proto stays as it was). An empty ``visible_device_list`` means
        *every* GPU to TensorFlow, so a rank without a GPU is hidden by ``device_count``."""
        if self.cpu_host:
            return {}
        if self.index is None:
            return {"device_count": {"GPU": 0}, "gpu_options": {"allow_growth": True}}
        return {"gpu_options": {"visible_device_list": str(self.index), "allow_growth": True}}


def local_rank(environ: Mapping[str, str] = os.environ) -> Optional[Tuple[str, int]]:
    """(variable, value): this process's place among its host's ranks, from the first of
    ``LOCAL_RANK_VARIABLES`` set; None when no launcher set one (a process started alone)."""
    for name in LOCAL_RANK_VARIABLES:
        value = environ.get(name, "").strip()
        if value:
            if not value.isdigit():
                raise UserError(f"{name}={value!r} is not a local rank (a number); unset it or fix the launcher")
            return name, int(value)
    return None


def host_gpus(detected: int, environ: Mapping[str, str] = os.environ) -> int:
    """The GPUs this host's processes may use: ``detected`` (nvidia-smi's list, or TensorFlow's,
    which already honours CUDA_VISIBLE_DEVICES), capped by CUDA_VISIBLE_DEVICES where it is set.
    CUDA reads that list up to its first invalid entry: "" and "-1" hide every GPU."""
    listed = environ.get("CUDA_VISIBLE_DEVICES")
    if listed is None:
        return detected
    count = 0
    for entry in (e.strip() for e in listed.split(",")):
        if not entry or entry.startswith("-"):
            break
        count += 1
    return min(count, detected)


def computes(role: Role, spec) -> bool:
    """Does this rank run model layers under strategy ``spec`` (a StrategySpec)? Workers do; a PS
    task does where the strategy splits the model (its FC head runs on the PS); the chief only
    drives. In the workers layout, ranks a TF-layout launch added sit the run out."""
    if spec.layout == "single":
        return True
    if role.job == "worker":
        return True
    return spec.layout == "tf" and role.job == "ps" and spec.splits


def host_plan(computing: Sequence[bool], gpus: int, host: str) -> List[Optional[int]]:
    """GPU index of each of one host's ranks (in local-rank order), None for those that do not
    compute. More computing ranks than GPUs: refused, since two ranks on one GPU would each map
    its memory and time-share it, which no row should measure."""
    if not gpus:
        return [None] * len(computing)
    needed = sum(computing)
    if needed > gpus:
        raise UserError(f"host {host} has {gpus} GPU(s) for {needed} computing ranks (workers, and PS tasks "
                        f"that run the FC head); give it at most {gpus} worker slots in the hostfile, lower "
                        "--workers, or use hosts with more GPUs")
    plan, taken = [], 0
    for c in computing:
        plan.append(taken if c else None)
        taken += bool(c)
    return plan


def choose_gpu(rank: int, roles: Sequence[Role], hosts: Sequence[str], spec, gpus: int,
               environ: Mapping[str, str] = os.environ) -> GpuChoice:
    """Rank ``rank``'s GPU. ``hosts[r]`` names rank r's host (the rendezvous' address: ranks that
    share one share a machine); ``gpus`` is what ``host_gpus`` found on this rank's host. The
    host's ranks are numbered in rank order, which is how Open MPI, Slurm and Hydra number local
    ranks; a launcher's local rank that disagrees is a stale variable or addresses that do not
    tell machines apart, and either would put two ranks on one GPU."""
    if not gpus:
        return GpuChoice(None, 0)
    mine = [r for r, h in enumerate(hosts) if h == hosts[rank]]
    position = mine.index(rank)
    launcher = local_rank(environ)
    if launcher is not None and launcher[1] != position:
        raise UserError(f"rank {rank}: {launcher[0]}={launcher[1]}, but it is local rank {position} of the "
                        f"{len(mine)} ranks at {hosts[rank]}; unset a variable inherited from another launcher, "
                        "or give each machine one address (--network CIDR)")
    plan = host_plan([computes(roles[r], spec) for r in mine], gpus, hosts[rank])
    return GpuChoice(plan[position], gpus)
