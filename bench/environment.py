"""What code and machine a run used: commit, versions, CPU, GPUs (recorded in every row).

Every probe degrades to None and never raises: a missing git or nvidia-smi must not
cost a measurement.
"""
import contextlib
import importlib.metadata
import os
import platform
import re
import socket
import subprocess
from pathlib import Path


def environment_fields(repo_dir=None, ignore_paths=("results",)):
    """Describe the code and machine a run used; every probe degrades to None, never raises.

    TensorFlow and Horovod versions come from package metadata, so nothing heavy is imported.
    ``git_dirty`` counts modified tracked files outside ``ignore_paths`` (the result store
    itself changes with every run and must not make the next run look dirty).
    """
    repo_dir = Path(repo_dir) if repo_dir else Path(__file__).resolve().parent.parent
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
        "gpus": _gpu_count(),
        "hostname": socket.gethostname(),
    }


def _command_output(argv, keep_empty=False):
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=20)
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


def _gpu_count():
    out = _command_output(["nvidia-smi", "-L"])
    if out is None:
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))
