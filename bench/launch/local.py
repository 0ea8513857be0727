"""All ranks on this machine over loopback: no shaped links, no per-host bytes.

As root the whole launch runs in a network namespace of its own with only a loopback
interface (``unshare --net``): TensorFlow's servers bind every interface and run any graph
they are sent, and Horovod's rendezvous answers anyone, so the ranks' ports must not be
reachable from the LAN (firewall.py explains the risk). The namespace ends with the launch's
last process, so nothing is left to remove whatever way the run ends. Without root, the ports
are open to the network and one line says so.
"""
import os
import sys
from typing import Dict

from bench.launch.base import LaunchSpec, Launcher, mpirun_path
from bench.launch.firewall import NOT_ROOT_HINT

# Brings the namespace's loopback up, then becomes mpirun (same process: the launch's process
# group, which run_mpirun kills, still holds every rank).
_LOOPBACK_ONLY = ["unshare", "--net", "--", "sh", "-c", 'ip link set lo up && exec "$@"', "ralp-local"]


class LocalLauncher(Launcher):
    mode = "local"

    def __enter__(self):
        if os.geteuid() != 0:
            print(f"ralp-bench: warning: not root, so no loopback-only namespace: {NOT_ROOT_HINT}", file=sys.stderr)
        return self

    def spec(self, layout, rank_argv) -> LaunchSpec:
        argv = [mpirun_path(), "-np", str(layout.world), "--oversubscribe", "--bind-to", "none",
                "--mca", "btl", "self,vader,tcp"]
        if os.geteuid() == 0:
            argv = _LOOPBACK_ONLY + argv[:1] + ["--allow-run-as-root"] + argv[1:]
        return LaunchSpec(argv + [sys.executable, "-m", "bench.run"] + rank_argv, this_machine=True)

    def cluster_fields(self) -> Dict:
        return {"cluster_mode": "local", "hosts": 1, "link_bps": None, "ps_link_bps": None, "latency_s": None}
