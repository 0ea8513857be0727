"""What code and machine a run used: commit, versions, CPU, GPUs (recorded in every row).

Every probe degrades to None and never raises: a missing git or nvidia-smi must not
cost a measurement. GPU rows say which GPUs, which CUDA and cuDNN TensorFlow was built
for and whether Horovod has NCCL: without that, a GPU row measured through host memory
and Gloo looks like any other.
"""
import ast
import contextlib
import importlib.metadata
import importlib.util
import os
import platform
import re
import socket
import subprocess
import sys
from pathlib import Path

import bench

# The checkout (or the installed tree) the run's code comes from: git_commit and git_dirty describe it.
CODE_ROOT = Path(bench.__file__).resolve().parent.parent


def environment_fields(repo_dir=None, ignore_paths=("results",)):
    """Describe the code and machine a run used; every probe degrades to None, never raises.

    TensorFlow and Horovod versions come from package metadata and the GPU facts from files
    and a 0.2 s subprocess (``gpu_fields``), so nothing heavy is imported.
    ``git_dirty`` counts modified tracked files outside ``ignore_paths`` (the result store
    itself changes with every run and must not make the next run look dirty).
    """
    repo_dir = Path(repo_dir) if repo_dir else CODE_ROOT
    commit = _command_output(["git", "-C", str(repo_dir), "rev-parse", "HEAD"])
    status = _command_output(["git", "-C", str(repo_dir), "status", "--porcelain",
                              "--untracked-files=no", "--", "."]
                             + [f":(exclude){p}" for p in ignore_paths], keep_empty=True)
    return {
        "git_commit": commit,
        "git_dirty": (bool(status.strip()) if status is not None and commit else None),
        "tf_version": package_version("tensorflow", "tensorflow-cpu", "tensorflow-gpu"),
        "horovod_version": package_version("horovod"),
        "mpi_version": _mpi_version(),
        "python_version": platform.python_version(),
        "cpu_model": _cpu_model(),
        "cpu_cores": os.cpu_count(),
        **gpu_fields(),
        "hostname": socket.gethostname(),
    }


def gpu_fields():
    """GPU model and count (nvidia-smi), the CUDA and cuDNN versions TensorFlow was built for,
    and Horovod's NCCL: None/0/False where there is none, None where it cannot be told."""
    names = gpu_names()
    build = tf_build_info()
    nccl = horovod_nccl_code()
    return {
        "gpus": len(names),
        "gpu_model": " + ".join(sorted(set(names))) or None,
        "cuda_version": build.get("cuda_version"),
        "cudnn_version": build.get("cudnn_version"),
        "nccl_version": nccl_version(nccl),
        "nccl_built": None if nccl is None else bool(nccl),
    }


def _command_output(argv, keep_empty=False, timeout=20, env=None):
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    out = proc.stdout.strip()
    return out if (out or keep_empty) else None


def package_version(*names):
    for name in names:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def _mpi_version():
    out = _command_output(["mpirun", "--version"])
    if not out:
        return None
    first = out.splitlines()[0]  # "mpirun (Open MPI) 4.1.4"
    match = re.search(r"\(([^)]+)\)\s*(\S+)", first)
    return f"{match.group(1)} {match.group(2)}" if match else first


def _cpu_model():
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or None


def gpu_names():
    """One name per GPU nvidia-smi lists ([] without nvidia-smi or a working driver)."""
    out = _command_output(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], timeout=10)
    return [line.strip() for line in (out or "").splitlines() if line.strip()]


def _package_dir(name):
    with contextlib.suppress(ImportError, ValueError):
        spec = importlib.util.find_spec(name)  # finds, does not import
        if spec and spec.submodule_search_locations:
            return Path(list(spec.submodule_search_locations)[0])
    return None


def tf_build_info():
    """What ``tf.sysconfig.get_build_info()`` returns (is_cuda_build, cuda_version,
    cudnn_version...), read from the generated file it comes from, since importing TensorFlow
    costs seconds; {} without TensorFlow."""
    tf_dir = _package_dir("tensorflow")
    if tf_dir is None:
        return {}
    with contextlib.suppress(OSError, SyntaxError, ValueError, TypeError):
        for node in ast.parse((tf_dir / "python" / "platform" / "build_info.py").read_text()).body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "build_info" for t in node.targets):
                value = node.value  # collections.OrderedDict([(key, value), ...]) or a dict literal
                literal = value.args[0] if isinstance(value, ast.Call) and value.args else value
                return dict(ast.literal_eval(literal))
    return {}


# Horovod's own answer (``hvd.nccl_built()`` returns this C function's value: NCCL_VERSION_CODE or
# 0), read from its library with TensorFlow's libraries on the loader path: 0.2 s, where importing
# horovod.tensorflow takes seconds. A library only TensorFlow's import finds: ask through it.
_NCCL_PROBE = ("import ctypes, sys\n"
               "try:\n"
               "    code = ctypes.CDLL(sys.argv[1]).horovod_nccl_built()\n"
               "except OSError:\n"
               "    import horovod.tensorflow as hvd\n"
               "    code = hvd.nccl_built()\n"
               "print(int(code))\n")


def horovod_nccl_code():
    """NCCL_VERSION_CODE Horovod was built with, 0 without NCCL, None without Horovod for TensorFlow."""
    hvd_dir, tf_dir = _package_dir("horovod"), _package_dir("tensorflow")
    libs = sorted((hvd_dir / "tensorflow").glob("mpi_lib*.so")) if hvd_dir and tf_dir else []
    if not libs:
        return None
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3",
           "LD_LIBRARY_PATH": os.pathsep.join(filter(None, [str(tf_dir), os.environ.get("LD_LIBRARY_PATH")]))}
    out = _command_output([sys.executable, "-c", _NCCL_PROBE, str(libs[0])], timeout=60, env=env)
    lines = (out or "").split()
    return int(lines[-1]) if lines and lines[-1].isdigit() else None


def nccl_version(code):
    """'2.18.3' from NCCL_VERSION_CODE (major*10000 + minor*100 + patch since NCCL 2.9,
    major*1000 + minor*100 + patch before); None for 0 or None."""
    if not code:
        return None
    major, rest = divmod(code, 10000) if code >= 10000 else divmod(code, 1000)
    return f"{major}.{rest // 100}.{rest % 100}"
