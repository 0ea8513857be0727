"""Measure this machine's conv and matmul throughput with TensorFlow (``--hardware local``).

Kept apart from ralp/hardware.py so the cost model's arithmetic never imports TensorFlow;
load_hardware("local") reaches here only when this machine is asked for.
"""
import json
import os
import platform
import time
from pathlib import Path

from ralp.hardware import CALIBRATION_PATH, Hardware


def _timed_flops(fn, flops_per_call: float, budget_s: float) -> float:
    fn()  # warm-up: tracing and memory allocation
    calls, start = 0, time.perf_counter()
    while True:
        fn()
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= budget_s:
            return flops_per_call * calls / elapsed


def _measure() -> dict:
    import tensorflow as tf
    images = tf.random.normal([8, 56, 56, 64])
    kernel = tf.random.normal([3, 3, 64, 64])
    conv_flops = 2 * 3 * 3 * 64 * 64 * 56 * 56 * 8
    a = tf.random.normal([1024, 1024])
    matmul_flops = 2 * 1024 ** 3
    # Each function returns one element so the timing includes the op, not a large copy back.
    conv = tf.function(lambda: tf.nn.conv2d(images, kernel, 1, "SAME")[0, 0, 0, 0])
    matmul = tf.function(lambda: tf.linalg.matmul(a, a)[0, 0])
    return {
        "worker_conv_flops": _timed_flops(lambda: conv().numpy(), conv_flops, 1.0),
        "worker_dense_flops": _timed_flops(lambda: matmul().numpy(), matmul_flops, 1.0),
    }


def _machine_key() -> str:
    import tensorflow as tf
    return f"{platform.node()}|{platform.machine()}|{os.cpu_count()}|tf{tf.__version__}"


def calibrate(force: bool = False, path: Path = CALIBRATION_PATH) -> Hardware:
    """Measure this machine (about 3 s) or reuse the cached result for the same machine."""
    key = _machine_key()
    cached = None
    if not force and path.exists():
        try:
            cached = json.loads(path.read_text())
        except (OSError, ValueError):
            cached = None
    if not cached or cached.get("machine") != key:
        cached = dict(_measure(), machine=key, measured_at=time.strftime("%Y-%m-%dT%H:%M:%S"))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(cached, indent=2))
    return Hardware(
        name="local", worker_conv_flops=cached["worker_conv_flops"],
        worker_dense_flops=cached["worker_dense_flops"], ps_flops=cached["worker_dense_flops"],
        worker_bandwidth=10e9, ps_bandwidth=10e9, latency_s=50e-6, is_preset=False,
        description=f"calibrated on this machine ({cached['measured_at']}, cached in {path}); "
                    "link defaults to 10 Gb/s: set it to what the (emulated) network provides")
