"""Bring a TensorFlow cluster up over MPI, and the small control plane beside it.

Every rank finds the address it is reached at, reserves a free port (held until its
server has bound it: ``reserve_port``), and the ranks exchange host:port with an MPI
allgather; that builds the ``tf.train.ClusterSpec``. PS and worker ranks then run a
``tf.distribute.Server`` and wait; the chief drives training through the TF runtime.

MPI is also the control plane: counters of each host's NIC are gathered
at phase boundaries (so bytes on the wire cover the timed steps only) and the
chief tells everyone when to stop. MPI's blocking collectives spin a core
while they wait, which would steal CPU from TensorFlow in the same process,
so every wait here goes through a non-blocking barrier polled with sleeps.
"""
import functools
import ipaddress
import os
import socket
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from bench.core.errors import UserError
from bench.core.roles import Role
from bench.launch.cgroups import threads_for, usable_cores
from bench.launch.nic import fabric_bytes, fabric_of, ipv4_interfaces, tcp_counters, total_bytes
from bench.rank.gpu import GpuChoice

LOOPBACK = "127.0.0.1"


def polite_allgather(comm, obj, poll_s: float = 0.005):
    """allgather that sleeps instead of spinning while other ranks catch up.

    ``obj`` may be a callable: it is evaluated only once every rank has
    arrived, so a NIC counter read inside it is taken at the same moment on
    every host (a waiting rank must not read its counters early).
    """
    request = comm.Ibarrier()
    while not request.Test():
        time.sleep(poll_s)
    return comm.allgather(obj() if callable(obj) else obj)


def choose_addresses(gathered: List[dict], network: Optional[str]) -> List[str]:
    """Pick, for every rank, the address its peers reach it at.

    ``gathered[r]`` = {"host": hostname, "addrs": [ip/prefix, ...]} of rank r.
    With a CIDR, each rank uses its address in it. Without one: all ranks on
    one machine (same hostname, same addresses) talk over loopback; otherwise
    each rank uses the address that shares a subnet with a peer on another host.
    """
    if network:
        try:
            net = ipaddress.ip_network(network, strict=False)
        except ValueError:
            raise UserError(f"--network {network!r} is not a CIDR such as 10.0.0.0/24") from None
        chosen = []
        for rank, info in enumerate(gathered):
            match = [a for a in info["addrs"] if ipaddress.ip_interface(a).ip in net]
            if not match:
                raise UserError(f"rank {rank} on {info['host']} has no address in {network}; fix --network")
            chosen.append(str(ipaddress.ip_interface(match[0]).ip))
        return chosen
    signature = {(g["host"], tuple(sorted(g["addrs"]))) for g in gathered}
    if len(signature) == 1:
        return [LOOPBACK] * len(gathered)
    chosen = []
    for rank, info in enumerate(gathered):
        mine = [ipaddress.ip_interface(a) for a in info["addrs"] if not ipaddress.ip_interface(a).is_loopback]
        others = [ipaddress.ip_interface(a).ip for o in gathered if o is not info
                  for a in o["addrs"] if o["addrs"] != info["addrs"]]
        pick = next((m for m in mine if any(ip in m.network for ip in others)), mine[0] if mine else None)
        if pick is None:
            raise UserError(f"rank {rank} on {info['host']} has no non-loopback address; pass --network CIDR")
        chosen.append(str(pick.ip))
    return chosen


# TensorFlow's gRPC server sets SO_REUSEPORT on its listening socket when this is set
# (grpc_server_lib.cc reads it as the server starts), so it can bind a port reserve_port holds.
REUSE_PORT_ENV = "TF_GRPC_REUSE_PORT"


def reserve_port() -> socket.socket:
    """A socket bound to a free port, held until this rank's TF server has bound the port too.

    Why held: a port let go of before the server binds it is anyone's while TensorFlow imports
    (seconds on a capped host), and the server dies with "Could not start gRPC server" if a
    socket on the host has it by then (seen once in CI: a worker of two on one host). Held with
    SO_REUSEPORT, the port is closed to every other socket: bind(0) and connect() skip it, and a
    bind to it needs SO_REUSEPORT and the same user, which TF's server has once
    ``REUSE_PORT_ENV`` is set (rendezvous sets it). This socket never listens, so every
    connection goes to the server. Two ranks on one host can never pick the same port either.

    Why every address: the server binds the wildcard (0.0.0.0, or [::] dual-stack), which
    fails if any address of the host has the port, say a daemon's listener on 127.0.0.1; a
    port picked free on the rank's own address only could be one of those."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    s.bind(("0.0.0.0", 0))
    return s


@dataclass
class ClusterInfo:
    """What every rank knows after the rendezvous."""
    rank: int
    world: int
    addresses: List[str]          # per rank
    spec: Dict[str, List[str]]    # TF cluster spec (chief/ps/worker), empty for horovod layout
    loopback: bool
    reserved: Optional[socket.socket] = field(default=None, repr=False, compare=False)  # this rank's port

    def host_of(self, rank: int) -> str:
        return self.addresses[rank]

    def release_port(self):
        """Let go of this rank's port: once its TF server has bound it, or where none will."""
        if self.reserved is not None:
            self.reserved.close()
            self.reserved = None


def rendezvous(comm, role_by_rank: List[Role], network: Optional[str]) -> ClusterInfo:
    """Exchange addresses and free ports; build the TF cluster spec in rank order. Each rank's
    port stays reserved (``reserve_port``) until it calls ``release_port``."""
    network = network or os.environ.get("RALP_NETWORK")
    me = {"host": socket.gethostname(), "addrs": [str(i) for _, i in ipv4_interfaces()]}
    gathered = polite_allgather(comm, me)
    addresses = choose_addresses(gathered, network)
    rank = comm.Get_rank()
    os.environ[REUSE_PORT_ENV] = "1"  # before TensorFlow starts a server in this process
    reserved = reserve_port()
    endpoints = polite_allgather(comm, f"{addresses[rank]}:{reserved.getsockname()[1]}")
    spec: Dict[str, List[str]] = {}
    for r, role in enumerate(role_by_rank):
        spec.setdefault(role.job, []).append(endpoints[r])
    return ClusterInfo(rank, comm.Get_size(), addresses, spec, loopback=addresses[0] == LOOPBACK,
                       reserved=reserved)


def thread_counts(intra: Optional[int], inter: Optional[int], ranks_on_host: int):
    """Split this host's cores among the ranks that compute on it (overridable).

    The host's cores are its CPU quota where its cgroup has one (an emulated
    host, a container with a CPU limit), else the cores this process may run on.
    """
    return intra or threads_for(usable_cores() / max(1, ranks_on_host)), inter or 2


def start_server(info: ClusterInfo, role: Role, intra: int, inter: int, gpu: Optional[GpuChoice] = None):
    """This rank's TF server. Its devices come from this ConfigProto, not from the eager context,
    so the rank's GPU (``gpu``, bench/rank/gpu.py) is set here; None or a CPU host: no GPU fields."""
    import tensorflow as tf

    config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=intra, inter_op_parallelism_threads=inter,
                                      **(gpu.config_fields() if gpu else {}))
    return tf.distribute.Server(tf.train.ClusterSpec(info.spec), job_name=role.job, task_index=role.index,
                                protocol="grpc", config=config, start=True)


def device_for(job: str, index: int) -> str:
    """Device string for a task's first GPU if it has one, else its CPU.

    Called on the chief after it connected, when remote devices are listed.
    """
    import tensorflow as tf

    prefix = f"/job:{job}/replica:0/task:{index}"
    names = [d.name for d in tf.config.list_logical_devices()]
    gpu = f"{prefix}/device:GPU:0"
    return gpu if gpu in names else f"{prefix}/device:CPU:0"


# ---- bytes on the wire ------------------------------------------------------

def _peers(info: ClusterInfo) -> Tuple[str, ...]:
    """Addresses of the other hosts; ranks that share this host's address are not peers."""
    me = info.addresses[info.rank]
    return tuple(sorted(set(info.addresses) - {me}))


@functools.lru_cache(maxsize=None)
def _fabric(peers: Tuple[str, ...]):
    """The sources this host counts (bench/launch/nic.py), looked up once: a read inside a
    sample round must not wait on `ip route get` per peer."""
    return fabric_of(peers)


def read_nic(info: ClusterInfo) -> Optional[dict]:
    """This host's byte counters (every interface routing to a peer, every RDMA port: summed in
    tx/rx, each in "sources") and TCP segment counters, or None when ranks talk over loopback."""
    peers = _peers(info)
    if info.loopback or not peers:
        return None

    sources = fabric_bytes(_fabric(peers))
    tx, rx = total_bytes(sources)
    return {"host": info.addresses[info.rank], "sources": sources, "tx": tx, "rx": rx, "tcp": tcp_counters()}


class TrafficMeter:
    """Gathers the byte counters of every host at phase boundaries.

    Every rank of the job takes part (collectively); serving ranks do so from
    ``follow_until_stopped``. ``sample()`` returns {host: (tx, rx, tcp segments
    sent, retransmitted, timeouts, then tx and rx of each source)}, tx and rx summed
    over the host's sources, which ``sources[host]`` names in order; ``delta(a, b)``
    each of them in between; ``by_source`` the per-source pairs back by name.
    """

    TOTALS = 5  # tx, rx, and the three TCP counters before the per-source pairs

    def __init__(self, comm, info: ClusterInfo):
        self.comm, self.info = comm, info
        self.sources: Dict[str, Tuple[str, ...]] = {}
        if not info.loopback and _peers(info):
            _fabric(_peers(info))  # routes looked up now, outside every sample round

    def sample(self, command: str = "sample") -> Dict[str, tuple]:
        replies = polite_allgather(self.comm, lambda: (command, read_nic(self.info)))
        for _, nic in replies:
            if nic:
                self.sources.setdefault(nic["host"], tuple(nic.get("sources", ())))
        return _by_host(replies)

    @staticmethod
    def delta(before: Dict[str, tuple], after: Dict[str, tuple]) -> Dict[str, tuple]:
        return {h: tuple(a - b for a, b in zip(after[h], before[h])) for h in before if h in after}

    def by_source(self, counts: Dict[str, tuple]) -> Dict[str, Dict[str, List[int]]]:
        """{host: {source: [tx, rx]}} out of ``counts`` (a sample or a delta of samples)."""
        return {h: {name: [int(v) for v in c[self.TOTALS + 2 * i:self.TOTALS + 2 * i + 2]]
                    for i, name in enumerate(self.sources.get(h, ()))}
                for h, c in counts.items()}


def _by_host(replies) -> Dict[str, tuple]:
    counters = {}
    for _, nic in replies:
        if nic and nic["host"] not in counters:
            pairs = [v for pair in nic.get("sources", {}).values() for v in pair]
            counters[nic["host"]] = (nic["tx"], nic["rx"], *nic.get("tcp", (0, 0, 0)), *pairs)
    return counters


def follow_until_stopped(comm, info: ClusterInfo):
    """Serving ranks: answer every sample round until some rank says 'stop'."""
    while True:
        replies = polite_allgather(comm, lambda: ("follow", read_nic(info)), poll_s=0.02)
        if any(cmd == "stop" for cmd, _ in replies):
            return
