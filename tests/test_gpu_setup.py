"""`ci/setup.sh --gpu` and `ci/gpu-check` where they cannot do their work: this machine has no GPU
and no CUDA 12 toolkit (issue 37 items 1 and 7).

Why these tests: the GPU install must refuse *before* it changes anything (no venv, no cache, no
apt), in one line that names what is missing, and a machine whose nvidia-smi lists a GPU must get
the GPU path without being asked; the GPU check must stop at once without a GPU. Neither script's
real work can run here, so the tests run the scripts themselves up to their refusals. A fake
`nvidia-smi` or a fake CUDA toolkit (a script that answers `nvcc --version`) stands in for the
machine, never for the code under test. The CPU path of ci/setup.sh is not run (minutes, and the
venv is in use); `bash -n` checks both scripts parse.
"""
import contextlib
import os
import shutil
import stat
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SETUP = ROOT / "ci" / "setup.sh"
GPU_CHECK = ROOT / "ci" / "gpu-check"
NO_GPU_LINE = "[gpu-check] no GPU visible (nvidia-smi -L lists none); this check needs one"


def _script(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def _fake_toolkit(home: Path, release: str, static_cudart: bool) -> Path:
    """A directory laid out as a CUDA toolkit whose nvcc reports ``release``."""
    _script(home / "bin" / "nvcc", f'echo "Cuda compilation tools, release {release}, V{release}.1"\n')
    (home / "include").mkdir(parents=True)
    (home / "include" / "cuda_runtime.h").write_text("")
    (home / "lib64").mkdir()
    if static_cudart:
        (home / "lib64" / "libcudart_static.a").write_text("")
    return home


def _env(tmp_path: Path, path_prefix=None, **extra):
    """An environment with no CUDA variables of the caller's, the venv and cache inside tmp_path, and
    PYTHON=false: should a refusal regress, the script stops at creating the venv, not in a build."""
    env = {k: v for k, v in os.environ.items() if k not in ("HOROVOD_CUDA_HOME", "CUDA_HOME", "CUDA_PATH")}
    env.update(RALP_VENV=str(tmp_path / "venv-gpu"), RALP_CACHE=str(tmp_path / "cache"), PYTHON="false",
               TMPDIR=str(tmp_path), **extra)
    if path_prefix:
        env["PATH"] = f"{path_prefix}:{env['PATH']}"
    return env


def _run(args, env, timeout=60):
    started = time.monotonic()
    done = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    return done, time.monotonic() - started


def _assert_refused_untouched(done, seconds, tmp_path):
    assert done.returncode != 0, done.stdout + done.stderr
    assert seconds < 20, f"the refusal took {seconds:.0f} s"
    errors = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith("[setup] error: "), done.stderr
    assert not (tmp_path / "venv-gpu").exists() and not (tmp_path / "cache").exists()
    assert "installing" not in done.stdout and "creating" not in done.stdout, done.stdout
    return errors[0]


@pytest.mark.parametrize("script", [SETUP, GPU_CHECK], ids=["setup.sh", "gpu-check"])
def test_scripts_parse(script):
    assert os.access(script, os.X_OK), f"{script} is not executable"
    done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def _cuda12_here():
    """A CUDA 12 nvcc where ci/setup.sh looks by default (then it would not refuse)."""
    found = []
    for nvcc in [*Path("/usr/local").glob("cuda*/bin/nvcc"), *filter(None, [shutil.which("nvcc")])]:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            found.append("release 12." in subprocess.run([str(nvcc), "--version"], capture_output=True,
                                                         text=True, timeout=20).stdout)
    return any(found)


@pytest.mark.skipif(_cuda12_here(), reason="this machine has a CUDA 12 nvcc: ci/setup.sh --gpu would build")
def test_gpu_setup_refuses_here_before_changing_anything(tmp_path):
    """This machine: no CUDA 12 nvcc (at most the CUDA 13 one /usr/local/cuda may hold)."""
    done, seconds = _run(["bash", str(SETUP), "--gpu"], _env(tmp_path))
    line = _assert_refused_untouched(done, seconds, tmp_path)
    assert "--gpu needs a CUDA 12 toolkit" in line
    for where in ("cuda-12-2-0-download-archive", "CUDA_HOME", "nvidia-cuda-nvcc-cu12", "CUDA 11.8"):
        assert where in line, line


def test_gpu_setup_names_the_wrong_cuda_release(tmp_path):
    home = _fake_toolkit(tmp_path / "cuda-11.8", "11.8", static_cudart=True)
    done, seconds = _run(["bash", str(SETUP), "--gpu"], _env(tmp_path, CUDA_HOME=str(home)))
    line = _assert_refused_untouched(done, seconds, tmp_path)
    assert f"found CUDA 11.8 ({home}/bin/nvcc)" in line, line


def test_gpu_setup_wants_the_static_cuda_runtime(tmp_path):
    """Horovod links libcudart_static.a (CMAKE_CUDA_RUNTIME_LIBRARY=Static): a CUDA 12 nvcc without it is refused."""
    home = _fake_toolkit(tmp_path / "cuda-12.2", "12.2", static_cudart=False)
    done, seconds = _run(["bash", str(SETUP), "--gpu"], _env(tmp_path, HOROVOD_CUDA_HOME=str(home)))
    line = _assert_refused_untouched(done, seconds, tmp_path)
    assert f"CUDA 12.2 at {home} without cuda_runtime.h or libcudart_static.a" in line, line


def test_a_listed_gpu_selects_the_gpu_path(tmp_path):
    """No flag, but nvidia-smi -L lists a GPU: the GPU path, whose refusal also offers --cpu."""
    fake_bin = tmp_path / "bin"
    _script(fake_bin / "nvidia-smi", 'echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)"\n')
    home = _fake_toolkit(tmp_path / "cuda-11.8", "11.8", static_cudart=True)
    done, seconds = _run(["bash", str(SETUP)], _env(tmp_path, path_prefix=fake_bin, CUDA_HOME=str(home)))
    line = _assert_refused_untouched(done, seconds, tmp_path)
    assert "--gpu needs a CUDA 12 toolkit" in line and line.endswith("or ci/setup.sh --cpu for the CPU-only stack")
    assert "nvidia-smi lists a GPU" in done.stdout


def test_setup_rejects_an_unknown_argument(tmp_path):
    done, seconds = _run(["bash", str(SETUP), "--gpus"], _env(tmp_path))
    line = _assert_refused_untouched(done, seconds, tmp_path)
    assert "unknown argument '--gpus'" in line and "--cpu" in line


def test_gpu_check_stops_without_a_gpu(tmp_path):
    done, seconds = _run([str(GPU_CHECK)], _env(tmp_path))
    assert done.returncode != 0
    assert seconds < 30
    assert done.stderr.strip() == NO_GPU_LINE and done.stdout == ""


def test_gpu_check_past_its_gate_fails_on_a_missing_venv(tmp_path):
    """A listed GPU gets it past the gate; a venv without ralp-bench is a FAIL line and a summary."""
    fake_bin = tmp_path / "bin"
    _script(fake_bin / "nvidia-smi", '[ "$1" = -L ] && echo "GPU 0: NVIDIA H100 (UUID: GPU-0)"\n')
    done, seconds = _run([str(GPU_CHECK)], _env(tmp_path, path_prefix=fake_bin))
    assert done.returncode != 0 and seconds < 30
    lines = done.stdout.splitlines()
    assert lines[0] == f"[gpu-check] FAIL setup: {tmp_path / 'venv-gpu'} has no ralp-bench; run ci/setup.sh --gpu"
    assert lines[1].startswith("[gpu-check] summary: 0 passed, 1 failed (setup), 0 skipped")
