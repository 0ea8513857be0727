"""Time-scaled emulation: make this machine's compute-to-network ratio match a real cluster.

A CPU here is ~100x slower than a V100, so a 10 Gbit/s link emulated at full
rate would hide the network bottleneck the V100 cluster has. Scaling the link
by the same factor as compute keeps the ratio of compute time to transfer
time, which is what decides the speedups. Compute here is one emulated host's:
the throughput calibrated under its CPU quota (bench/driver/calibration.py), or,
without quotas, this machine's share when W workers split its cores. Rows
record both the emulated rate and the preset.
"""
import os
from typing import Optional

from bench.core.errors import UserError
from bench.driver.calibration import hardware_under
from ralp.hardware import PRESETS

MIN_LINK_BPS = 1e6  # tc cannot shape usefully much below ~1 Mbit/s


def scaled_link(preset: str, workers: int = 1, cpus_per_host: Optional[float] = None) -> float:
    if preset not in PRESETS:
        raise UserError(f"--scale-to {preset!r} is not a preset; choose one of {', '.join(PRESETS)}")
    target = PRESETS[preset]
    if cpus_per_host:
        here, share = hardware_under(cpus_per_host), 1.0
    else:
        here, share = hardware_under(None), min(1.0, (os.cpu_count() or 1) / max(1, workers))
    factor = here.worker_conv_flops * share / target.worker_conv_flops
    return max(MIN_LINK_BPS, target.worker_bandwidth * factor)
