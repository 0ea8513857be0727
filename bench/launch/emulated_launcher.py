"""Ranks in network namespaces with shaped links (bench/launch/emulated_cluster.py builds them).

One emulated host per PS task and per worker: hosts 0..S-1 carry the PS tasks
(the chief beside PS 0), hosts S..S+W-1 one worker each, so every byte a
strategy moves between roles crosses a shaped NIC. mpirun runs inside host 0.
"""
import os
import sys
from typing import Dict, List, Optional, Union

from bench.launch import link_probe, netns
from bench.launch.base import LaunchSpec, Launcher, place_ranks
from bench.launch.emulated_cluster import EmulatedCluster
from ralp.links import LinkSpec


def run_cluster_name(driver: int) -> str:
    """The cluster of the run whose driver is process ``driver``: one name per process, so two
    runs on one machine never collide."""
    return f"ralp{driver % 100000}"


class EmulatedLauncher(Launcher):
    mode = "emulated"

    def __init__(self, workers: int, ps: int, link: Union[LinkSpec, float], name: Optional[str] = None,
                 cpus_per_host: Optional[float] = None, link_check: bool = True):
        """``link``: the cluster's LinkSpec (a bare number: every NIC at that many bit/s)."""
        name = name or run_cluster_name(os.getpid())
        self.link = link if isinstance(link, LinkSpec) else LinkSpec(float(link))
        self.cluster = EmulatedCluster(ps + workers, self.link.worker_bps, self.link.latency_s, self.link.ps_bps,
                                       name=name, cpus_per_host=cpus_per_host, nic_bps=self.link.nic_bps)
        self._checks = link_probe.LinkChecks(lambda: self.cluster) if link_check else None

    def __enter__(self):
        self.cluster.__enter__()
        return self

    def __exit__(self, *exc):
        return self.cluster.__exit__(*exc)

    def spec(self, layout, rank_argv) -> LaunchSpec:
        counts = place_ranks(layout, self.host_slots())
        argv = self.cluster.mpirun_prefix() + ["mpirun"] + self.cluster.mpirun_args(counts)
        for name in ("TF_CPP_MIN_LOG_LEVEL", "PYTHONUNBUFFERED", "OMPI_MCA_btl_vader_single_copy_mechanism"):
            argv += ["-x", name]
        rank_argv = rank_argv + ["--network", self.cluster.subnet]
        return LaunchSpec(argv + [sys.executable, "-m", "bench.run"] + rank_argv, this_machine=True)

    def workers_per_host(self, layout) -> int:
        return 1  # one host per worker (module docstring)

    def after_run(self):
        for host in self.cluster.hosts:
            netns.kill_netns_processes(host.netns)

    def cluster_fields(self) -> Dict:
        c = self.cluster
        return {"cluster_mode": "emulated", "hosts": len(c.hosts), **self.link.row_fields(),
                "link_packets_bps": c.nic_bps or c.bandwidth_bps, "cpus_per_host": c.cpus_per_host or None}

    def host_slots(self) -> List[int]:
        return [1] * len(self.cluster.hosts)  # one host per worker (module docstring)

    def link_checks(self):
        """The emulated links' check, measured once per cluster (link_probe.PATTERNS); off with
        --no-link-check, and for one host (no link)."""
        return self._checks if len(self.cluster.hosts) >= 2 else None
