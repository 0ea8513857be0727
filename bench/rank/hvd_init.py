"""Start Horovod on ranks that mpirun launched, with Gloo or MPI doing the collectives.

Why Gloo by default: Horovod's MPI path runs ``MPI_Allreduce`` from its
background thread, and Open MPI's TCP transport waits by polling: a rank
spins a core for as long as its peers take. On a CPU host capped at a
fraction of a core (an emulated host, a container) the spinning eats the
quota the transfer itself needs: measured on 1 Gbit/s emulated links with
0.67 cores per host, an all-reduce of 14 MB ran at 20% of line rate. Gloo's
TCP transport waits in epoll and condition variables, which is what
``horovodrun --gloo`` gives users. Under mpirun, Horovod 0.28.1 can use Gloo
only with its Gloo *controller* (Gloo ops under the MPI controller have no
context), so this module does what ``horovodrun --gloo`` does: the first
worker rank runs Horovod's HTTP rendezvous server, every worker learns its
address over MPI, and each sets the HOROVOD_* variables before ``hvd.init``.
``ops="mpi"`` keeps Horovod's MPI controller and MPI collectives.

Gloo's timeout: every Gloo operation (one broadcast or one ring step of an
all-reduce) fails after HOROVOD_GLOO_TIMEOUT_SECONDS, 30 s by default
(horovod/common/gloo/gloo_context.cc). That suits a datacenter NIC, not a link
scaled to a V100's compute ratio: VGG-16's first FC matrix alone is 411 MB, so
Horovod's start-up broadcast of it to one peer at 105.7 Mbit/s takes ~32 s at
line rate, and both tries of that point failed with "Graph execution error" (the
paper sweep, h100-400g scaled, 2 workers) while the same run at 1 Gbit/s (3.3 s)
passed. The harness has its own hang watchdog, sized from --step-timeout
(bench/rank/trainer.py), which names the phase that hung; Gloo's limit is set to
that watchdog's longest window (``gloo_timeout_s``) so it never fires first on
a transfer that is merely slow.
"""
import math
import os
from typing import List, Optional

from bench.core.horovod_settings import HIERARCHICAL_NEEDS_NCCL
from bench.launch.nic import route_iface
from bench.rank.tf_cluster import polite_allgather

OPS = ("gloo", "mpi")


def slot_env(addresses: List[str], index: int) -> dict:
    """HOROVOD_RANK/SIZE/LOCAL_*/CROSS_* for worker ``index`` of workers at ``addresses``
    (one entry per worker, in rank order; workers sharing an address share a host)."""
    hosts = list(dict.fromkeys(addresses))
    me = addresses[index]
    local = [i for i, a in enumerate(addresses) if a == me]
    local_rank = local.index(index)
    # Cross communicator: the workers with the same local rank on every host.
    cross = [h for h in hosts if sum(1 for a in addresses if a == h) > local_rank]
    return {"HOROVOD_RANK": str(index), "HOROVOD_SIZE": str(len(addresses)),
            "HOROVOD_LOCAL_RANK": str(local_rank), "HOROVOD_LOCAL_SIZE": str(len(local)),
            "HOROVOD_CROSS_RANK": str(cross.index(me)), "HOROVOD_CROSS_SIZE": str(len(cross)),
            "HOROVOD_HOSTNAME": me}


def gloo_timeout_s(window_s: float) -> int:
    """Seconds one Gloo operation may take: the harness watchdog's longest window (the setup's,
    where the model is broadcast, or the warm-up's, where the first step is traced: RunConfig's
    setup_window_s and warmup_window_s), never below Horovod's own default of 30 s."""
    return max(30, math.ceil(window_s))


def init_horovod(comm, worker_ranks: List[int], addresses: List[str], ops: str = "gloo", tuning: dict = None,
                 timeout_s: Optional[int] = None):
    """hvd.init() on the ranks in ``worker_ranks`` (collective over ``comm``: every rank calls it;
    others return None). ``addresses[r]``: where rank r is reached; ``tuning``: ``tuning_env``'s
    variables; ``timeout_s``: Gloo's per-operation limit (``gloo_timeout_s``; None keeps
    Horovod's 30 s). Returns the horovod module."""
    os.environ.update(tuning or {})
    if ops not in OPS:
        raise ValueError(f"Horovod ops must be one of {OPS}, got {ops!r}")
    rank = comm.Get_rank()
    is_worker = rank in worker_ranks
    if ops == "mpi":
        polite_allgather(comm, None)
        if not is_worker:
            return None
        import horovod.tensorflow as hvd

        if os.environ.get("HOROVOD_HIERARCHICAL_ALLREDUCE") == "1" and not hvd.nccl_built():
            raise RuntimeError(HIERARCHICAL_NEEDS_NCCL)  # a host whose Horovod differs from the driver's
        hvd.init(comm=worker_ranks if len(worker_ranks) != comm.Get_size() else None)
        return hvd
    server = port = None
    if rank == worker_ranks[0]:
        from horovod.runner.common.util.hosts import SlotInfo
        from horovod.runner.http.http_server import RendezvousServer

        server = RendezvousServer(verbose=0)
        port = server.start()
        worker_addrs = [addresses[r] for r in worker_ranks]
        plan = []
        for i in range(len(worker_ranks)):
            env = slot_env(worker_addrs, i)
            plan.append(SlotInfo(hostname=env["HOROVOD_HOSTNAME"], rank=i, local_rank=int(env["HOROVOD_LOCAL_RANK"]),
                                 cross_rank=int(env["HOROVOD_CROSS_RANK"]), size=len(worker_ranks),
                                 local_size=int(env["HOROVOD_LOCAL_SIZE"]),
                                 cross_size=int(env["HOROVOD_CROSS_SIZE"])))
        server.init(plan)
    port = polite_allgather(comm, port)[worker_ranks[0]]
    if not is_worker:
        return None

    index = worker_ranks.index(rank)
    worker_addrs = [addresses[r] for r in worker_ranks]
    peer = next((a for a in worker_addrs if a != worker_addrs[index]), worker_addrs[index])
    os.environ.update(slot_env(worker_addrs, index))
    os.environ.update({
        "HOROVOD_GLOO_RENDEZVOUS_ADDR": addresses[worker_ranks[0]],
        "HOROVOD_GLOO_RENDEZVOUS_PORT": str(port),
        "HOROVOD_CONTROLLER": "gloo",
        "HOROVOD_CPU_OPERATIONS": "gloo",
        "HOROVOD_GLOO_IFACE": route_iface(peer),
    })
    if timeout_s is not None:
        os.environ["HOROVOD_GLOO_TIMEOUT_SECONDS"] = str(int(timeout_s))
    import horovod.tensorflow as hvd

    hvd.init()
    hvd._ralp_rendezvous = server  # keep the server alive as long as Horovod runs
    return hvd
