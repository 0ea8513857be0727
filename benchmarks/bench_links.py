"""Link efficiency of the emulated cluster: each traffic pattern's share of line rate.

Why tracked: every time figure of the suite is only as fair as the transport under
it. If a change to link shaping, Open MPI or Horovod settings made one strategy's
pattern (Horovod's all-reduce, the workers' fan-in to the PS) reach less of the
line rate, its speed would fall for reasons that have nothing to do with the
strategy. ``setup_cache`` brings up one cluster per (rate, worker hosts) of the
profile and measures every pattern once (bench/launch/link_probe.py; again, up to 3 times,
while the hypervisor takes more than 10% of the machine's CPU: bench/launch/cpu_steal.py); each
``track_`` reads one figure. Needs root and namespaces (skipped otherwise).
A profile whose ``links`` is empty (history: many commits, the transport rarely
changes) defines no link benchmark at all, so asv spends nothing on clusters here.
"""
from .common import ASV_CLUSTER_NAME, AsvSettings, active_profile

PROFILE = active_profile()
LINKS = PROFILE.get("links", {"rates": ["48mbit", "1gbit"], "worker_hosts": [2]})
WANTED = bool(LINKS.get("rates") and LINKS.get("worker_hosts"))


def measure_links(links):
    from bench.launch import link_probe
    from bench.launch.emulated_cluster import EmulatedCluster
    from bench.launch.netns import can_emulate
    from ralp.hardware import parse_bandwidth

    if not can_emulate()[0]:
        return {}
    found = {}
    for rate in links["rates"]:
        for workers in links["worker_hosts"]:
            with EmulatedCluster(1 + workers, parse_bandwidth(rate), name=ASV_CLUSTER_NAME + "l") as cluster:
                for pattern in link_probe.PATTERNS:
                    floats = link_probe.ALLREDUCE_FLOATS if pattern == "all-reduce" else None
                    result = link_probe.measure_pattern(cluster, pattern, seconds=1.0, floats=floats)
                    found[(pattern, workers, rate)] = result.efficiency
    return found


class LinkEfficiency(AsvSettings):
    """Measured time at line rate over measured time, per pattern, worker hosts and rate."""
    params = (["one flow", "both ways", "fan-in", "all-reduce"], LINKS["worker_hosts"], LINKS["rates"])
    param_names = ["pattern", "worker_hosts", "rate"]
    unit = "share of line rate"

    def setup_cache(self):
        return measure_links(LINKS)

    setup_cache.timeout = 1800

    def track_link_efficiency(self, found, pattern, worker_hosts, rate):
        if not found:
            from asv_runner.benchmarks.mark import SkipNotImplemented

            raise SkipNotImplemented("no emulated cluster here (needs root and network namespaces)")
        return found[(pattern, worker_hosts, rate)]


if not WANTED:  # asv discovers classes by name: without one, the profile runs no probe
    del LinkEfficiency
