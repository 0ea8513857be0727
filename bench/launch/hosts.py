"""A real cluster from a hostfile: the first host carries the chief and PS 0.

Hostfile lines are Open MPI's: ``host [slots=N]``. Ranks are placed in role
order (bench.launch.base.place_ranks) with ``-H host:count,...``; mpirun
reaches the hosts over ssh as usual. ``--network CIDR`` restricts MPI and the
TF servers to the cluster interface on multi-homed hosts.
"""
import os
import sys
from typing import Dict, List, Optional, Tuple

from bench.errors import UserError
from bench.launch.base import LaunchSpec, Launcher, mpirun_path, place_ranks


def read_hostfile(path: str) -> List[Tuple[str, int]]:
    if not path or not os.path.isfile(path):
        raise UserError(f"hostfile {path!r} not found; pass --hostfile FILE with lines like 'node1 slots=4'")
    hosts = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            words = line.split("#", 1)[0].split()
            if not words:
                continue
            slots = 1
            for word in words[1:]:
                key, _, value = word.partition("=")
                if key in ("slots", "max_slots") and value.isdigit():
                    slots = int(value)
                else:
                    raise UserError(f"{path}:{number}: cannot read {word!r}; expected 'host slots=N'")
            hosts.append((words[0], slots))
    if not hosts:
        raise UserError(f"hostfile {path} lists no hosts")
    return hosts


class HostsLauncher(Launcher):
    mode = "hosts"

    def __init__(self, hostfile: str, network: Optional[str] = None, link=None):
        """``link``: the LinkSpec the user states for the real NICs (None: not stated)."""
        self.hosts = read_hostfile(hostfile)
        self.network = network
        self.link = link

    def spec(self, layout, rank_argv) -> LaunchSpec:
        counts = place_ranks(layout, [s for _, s in self.hosts])
        placement = ",".join(f"{h}:{n}" for (h, _), n in zip(self.hosts, counts) if n)
        argv = [mpirun_path(), "-H", placement, "--map-by", "slot", "--bind-to", "none",
                "-x", "TF_CPP_MIN_LOG_LEVEL", "-x", "PYTHONUNBUFFERED"]
        if self.network:
            argv += ["--mca", "btl_tcp_if_include", self.network, "--mca", "oob_tcp_if_include", self.network]
            rank_argv = rank_argv + ["--network", self.network]
        if os.geteuid() == 0:
            argv.insert(1, "--allow-run-as-root")
        return LaunchSpec(argv + [sys.executable, "-m", "bench.run"] + rank_argv)

    def cluster_fields(self) -> Dict:
        links = self.link.row_fields() if self.link else {"link_bps": None, "ps_link_bps": None, "latency_s": None}
        return {"cluster_mode": "hosts", "hosts": len(self.hosts), **links}
