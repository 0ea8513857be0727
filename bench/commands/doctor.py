"""`ralp-bench doctor`: is this machine ready, and if not, what fixes it.

Each check prints ok/FAIL with the version or the fix; optional capabilities
(network namespaces, GPUs) are reported but do not fail the check, since a
local run needs neither. GPUs that are there but that TensorFlow or Horovod
cannot use well do fail it: every GPU number measured so would be wrong.
"""
import os
import shutil
import subprocess
from typing import Optional

from bench.core.cache import cached_horovod_wheel
from bench.launch.cgroups import available, hierarchy
from bench.launch.emulated_cluster import EmulatedCluster
from bench.launch.link_probe import measure_pattern
from bench.launch.netns import can_emulate, netem_available
from bench.store.environment import gpu_names, nccl_version, package_version


def register(subparsers):
    p = subparsers.add_parser("doctor", help="check TensorFlow, Horovod, MPI, namespaces, tc, cores, GPUs")
    p.set_defaults(func=run)


def _tensorflow():
    try:
        import tensorflow as tf
    except ImportError:
        return False, "not importable; run ci/setup.sh"
    if not tf.__version__.startswith("2.15."):
        return False, f"{tf.__version__}: Horovod 0.28.1 needs TensorFlow 2.15.x (Keras 2); run ci/setup.sh"
    gpus = tf.config.list_physical_devices("GPU")
    return True, f"{tf.__version__} ({len(gpus)} GPU(s) visible)"


def _horovod_wheel():
    """The Horovod wheel ci/setup.sh built and cached for this TensorFlow and Python, if any: an install
    from a wheel (README, "Install as a package") then needs one `pip install` of it, not a build."""
    return cached_horovod_wheel(package_version("tensorflow-cpu", "tensorflow"))


def _horovod():
    try:
        import horovod
        import horovod.tensorflow as hvd
    except ImportError as exc:
        wheel = _horovod_wheel()
        fix = (f"pip install {wheel} (the wheel ci/setup.sh built)" if wheel else "build Horovod 0.28.1 "
               "against this TensorFlow: ci/setup.sh in a checkout, or README \"Install as a package\"")
        return False, f"horovod.tensorflow not importable ({exc}); {fix}"
    frameworks = "TensorFlow"
    controllers = [n for n, ok in (("MPI", hvd.mpi_built()), ("Gloo", hvd.gloo_built())) if ok]
    ops = [n for n, ok in (("NCCL", hvd.nccl_built()), ("DDL", hvd.ddl_built()), ("CCL", hvd.ccl_built()),
                           ("MPI", hvd.mpi_built()), ("Gloo", hvd.gloo_built())) if ok]
    detail = f"{horovod.__version__}: frameworks {frameworks}; controllers {'+'.join(controllers)}; ops {'+'.join(ops)}"
    missing = {"MPI", "Gloo"} - set(controllers)
    if missing:
        return False, detail + f"; missing {', '.join(sorted(missing))}: rebuild with ci/setup.sh"
    return True, detail


def _mpirun():
    path = shutil.which("mpirun")
    if not path:
        return False, "not found; apt-get install -y openmpi-bin libopenmpi-dev (ci/setup.sh does it)"
    out = subprocess.run([path, "--version"], capture_output=True, text=True).stdout.splitlines()
    return True, out[0] if out else path


def _mpi4py():
    try:
        import mpi4py
        from mpi4py import MPI
    except ImportError as exc:
        return False, f"not importable ({exc}); run ci/setup.sh"
    return True, f"{mpi4py.__version__} ({MPI.Get_library_version().replace(chr(0), '').splitlines()[0].strip()})"


def _emulation():
    ok, reason = can_emulate()
    if not ok:
        return None, reason
    return True, "network namespaces, veth, bridge and tc htb (ACK-first) shaping work" + (
        "; netem (latency) available" if netem_available() else "; no netem here: --latency must be 0")


def _cgroups():
    ok, reason = available()
    if not ok:
        return None, reason + "; emulated hosts then share the cores (contention, not a cluster)"
    kind, root = hierarchy()
    return True, f"CPU quotas per emulated host (cgroup {kind} at {root})"


def _links():
    """A 3-host emulated cluster at 100 Mbit/s: one flow and both ways as % of line rate."""
    if not can_emulate()[0]:
        return None, "no emulated cluster here"
    with EmulatedCluster(3, 100e6, name=f"rdoc{os.getpid() % 100000}") as cluster:
        found = [measure_pattern(cluster, p, 0.5) for p in ("one flow", "both ways", "fan-in")]
    text = ", ".join(f"{r.pattern} {r.efficiency:.0%}" for r in found)
    low = [r for r in found if r.efficiency < 0.9]
    return (None if low else True), f"share of line rate at 100 Mbit/s: {text}" + (
        " (below 90%: times on this machine's emulated links understate the network)" if low else "")


def _cpus():
    return True, f"{os.cpu_count()} CPU cores, {len(gpu_names())} NVIDIA GPU(s)"


def gpu_verdict(gpus: int, tf_cuda: Optional[bool], nccl_code: Optional[int]):
    """(ok, detail) for a host's GPU stack, from facts alone (so a test can give any):
    ``gpus`` visible GPUs, ``tf_cuda`` = tf.test.is_built_with_cuda() (None: TensorFlow not
    importable), ``nccl_code`` = horovod.tensorflow.nccl_built() (None: Horovod not importable).
    Without GPUs: n/a, as before. With GPUs, a CPU-only TensorFlow would train on the CPU and a
    Horovod without NCCL would all-reduce through host memory and Gloo: both fail the check.
    What is not importable is failed by its own check, not here."""
    if not gpus:
        return None, "no GPU visible; a CPU run needs no CUDA TensorFlow or NCCL"
    problems = []
    if tf_cuda is False:
        problems.append("TensorFlow is CPU-only (install tensorflow[and-cuda]==2.15.1)")
    if nccl_code == 0:
        problems.append("Horovod has no NCCL, so it would all-reduce through host memory and Gloo (rebuild "
                        "Horovod 0.28.1 with HOROVOD_GPU_OPERATIONS=NCCL)")
    if problems:
        return False, f"{gpus} GPU(s) visible, but " + "; ".join(problems) + "; ci/setup.sh --gpu sets up the GPU stack"
    nccl = f"Horovod with NCCL {nccl_version(nccl_code)}" if nccl_code else "Horovod not checked"
    return True, f"{gpus} GPU(s); TensorFlow {'built with CUDA' if tf_cuda else 'not checked'}; {nccl}"


def _gpu_facts():
    """What ``gpu_verdict`` judges, read on this machine: GPUs nvidia-smi lists or TensorFlow sees."""
    gpus, tf_cuda, nccl_code = len(gpu_names()), None, None
    try:
        import tensorflow as tf

        gpus, tf_cuda = max(gpus, len(tf.config.list_physical_devices("GPU"))), tf.test.is_built_with_cuda()
        import horovod.tensorflow as hvd

        nccl_code = int(hvd.nccl_built())
    except ImportError:
        pass
    return gpus, tf_cuda, nccl_code


def _gpu_stack():
    return gpu_verdict(*_gpu_facts())


CHECKS = [("TensorFlow", _tensorflow), ("Horovod", _horovod), ("mpirun", _mpirun), ("mpi4py", _mpi4py),
          ("emulated cluster", _emulation), ("CPU quotas", _cgroups), ("emulated links", _links),
          ("hardware", _cpus), ("GPU stack", _gpu_stack)]


def run(args):
    failed = 0
    for name, check in CHECKS:
        ok, detail = check()
        mark = "ok  " if ok else ("n/a " if ok is None else "FAIL")
        failed += ok is False
        print(f"[{mark}] {name:17s} {detail}")
    if failed:
        print(f"ralp-bench: error: {failed} check(s) failed; fix them as shown (ci/setup.sh installs everything)")
        return 1
    return 0
