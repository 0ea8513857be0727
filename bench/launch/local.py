"""All ranks on this machine over loopback: no shaped links, no per-host bytes."""
import os
import sys
from typing import Dict

from bench.launch.base import LaunchSpec, Launcher, mpirun_path


class LocalLauncher(Launcher):
    mode = "local"

    def spec(self, layout, rank_argv) -> LaunchSpec:
        argv = [mpirun_path(), "-np", str(layout.world), "--oversubscribe", "--bind-to", "none",
                "--mca", "btl", "self,vader,tcp"]
        if os.geteuid() == 0:
            argv.insert(1, "--allow-run-as-root")
        return LaunchSpec(argv + [sys.executable, "-m", "bench.run"] + rank_argv)

    def cluster_fields(self) -> Dict:
        return {"cluster_mode": "local", "hosts": 1, "link_bps": None, "ps_link_bps": None, "latency_s": None}
