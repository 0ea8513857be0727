"""Time-scaled emulation: make this machine's compute-to-network ratio match a real cluster.

A CPU here is ~100x slower than a V100, so a 10 Gbit/s link emulated at full
rate would hide the network bottleneck the V100 cluster has. Scaling the link
by the same factor as compute (measured throughput here / preset throughput)
keeps the ratio of compute time to transfer time, which is what decides the
speedups. Rows record both the emulated rate and the preset it stands for.
"""
from bench.errors import UserError


def scaled_link(preset: str) -> float:
    from ralp.hardware import PRESETS, calibrate

    if preset not in PRESETS:
        raise UserError(f"--scale-to {preset!r} is not a preset; choose one of {', '.join(PRESETS)}")
    target, here = PRESETS[preset], calibrate()
    factor = here.worker_conv_flops / target.worker_conv_flops
    return max(1e6, target.worker_bandwidth * factor)  # tc cannot shape usefully below ~1 Mbit/s
