"""ralp-bench installed as a package, the way a user without a checkout gets it (issue 33).

Why: ci/setup.sh installs the checkout editable, so nothing else notices a wheel that lacks a
module, a sweep file the README names, the example model a shipped sweep builds, or a runtime
dependency only requirements.txt lists. Here the sdist and the wheel built from it (``python -m
build``, as a release is built) go into a fresh virtual environment outside the checkout, its
dependencies from the package index, and the README's commands run from a directory holding none
of the checkout's files. Horovod is the one extra step: the wheel ci/setup.sh built and cached.
"""
import csv
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from bench.core.cache import HOROVOD_VERSION, cached_horovod_wheel
from tests.conftest import ROOT, ralp_bench

TF_PIN = "tensorflow-cpu==2.15.1"
PACKAGES = ("bench", "ralp", "strategies")


def _requirements_sections():
    """requirements.txt's lines under its ``# runtime`` and ``# tests`` headers, as Requirements."""
    sections, current = {}, None
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        if line.strip() in ("# runtime", "# tests"):
            current = sections.setdefault(line.strip()[2:], set())
            continue
        line = line.split("#", 1)[0].strip()
        if line:
            assert current is not None, f"requirements.txt: {line!r} sits above the '# runtime' header"
            current.add(str(Requirement(line)))
    return sections


def test_pyproject_declares_what_requirements_txt_pins():
    """ci/setup.sh installs requirements.txt, a wheel's users get pyproject.toml's lists: the same lines."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    sections = _requirements_sections()
    assert {str(Requirement(r)) for r in project["dependencies"]} == sections["runtime"]
    assert {str(Requirement(r)) for r in project["optional-dependencies"]["test"]} == sections["tests"]
    assert TF_PIN in project["dependencies"]


def _pip_offers_tensorflow():
    """Whether pip here finds tensorflow-cpu 2.15.1: a reachable package index (or a find-links
    directory or a fresh pip cache holding its page). Without it nothing can be installed."""
    proc = subprocess.run([sys.executable, "-m", "pip", "index", "versions", "tensorflow-cpu", "--timeout", "15",
                           "--retries", "1"], capture_output=True, text=True, timeout=120)
    available = [line for line in proc.stdout.splitlines() if line.startswith("Available versions:")]
    return bool(available) and "2.15.1" in available[0].split(":", 1)[1].replace(",", " ").split()


def _run(argv, cwd, timeout=300):
    """``argv`` from ``cwd`` with nothing pointing at the checkout (no PYTHONPATH)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    return subprocess.run([str(a) for a in argv], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**env, "TF_CPP_MIN_LOG_LEVEL": "2"})


@pytest.fixture(scope="module")
def scratch():
    """A directory outside the checkout, removed afterwards (the environment is ~1.5 GB)."""
    path = Path(tempfile.mkdtemp(prefix="ralp-wheel-"))
    assert ROOT not in path.parents
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def built(scratch):
    """The sdist and the wheel built from it, with the checkout's own setuptools (no download)."""
    out = scratch / "dist"
    proc = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (wheel,) = out.glob("ralp_bench-*.whl")
    return wheel


@pytest.fixture(scope="module")
def installed(scratch, built):
    """``pip install WHEEL`` into a fresh virtual environment: its bin directory."""
    if not _pip_offers_tensorflow():
        pytest.skip("pip finds no tensorflow-cpu 2.15.1 here (no package index reachable, nothing cached): "
                    "the wheel's dependencies cannot be installed")
    env_dir = scratch / "env"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    started = time.monotonic()
    proc = _run([env_dir / "bin" / "python", "-m", "pip", "install", "-q", built], cwd=scratch, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    print(f"pip install of the wheel and its dependencies: {time.monotonic() - started:.0f} s")
    return env_dir / "bin"


@pytest.fixture(scope="module")
def workdir(scratch):
    """Where the commands run: no sweeps/, examples/ or results/ of the checkout."""
    path = scratch / "work"
    path.mkdir()
    return path


def _tree_files(top, pattern):
    return {p.relative_to(ROOT).as_posix() for p in (ROOT / top).rglob(pattern) if "__pycache__" not in p.parts}


def test_the_wheel_holds_every_module_and_the_files_read_at_run_time(built):
    (sdist,) = built.parent.glob("ralp_bench-*.tar.gz")
    with tarfile.open(sdist) as tar:
        sources = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    assert {"requirements.txt", "ci/setup.sh", "sweeps/headline.toml", "examples/custom_cnn.py"} <= sources
    assert not any(name.startswith("tests/") for name in sources)  # MANIFEST.in: all of the suite or none
    names = set(zipfile.ZipFile(built).namelist())
    modules = set().union(*(_tree_files(top, "*.py") for top in PACKAGES))
    missing = sorted(modules - names)
    assert not missing, f"not in the wheel: {missing[:5]}; list their package in pyproject.toml [tool.setuptools]"
    shipped = {f"bench/shipped/{name}" for name in _tree_files("sweeps", "*.toml") | _tree_files("examples", "*.py")}
    assert shipped and shipped <= names, sorted(shipped - names)
    # The asv suite (benchmarks/) and the web assets asv's pages load (third_party/) are tools of the
    # checkout: asv imports the suite from the working tree, ci/asv-offline copies the assets.
    assert not any(n.startswith(("benchmarks/", "third_party/")) or "asv" in n for n in names), \
        sorted(n for n in names if "asv" in n or n.startswith(("benchmarks/", "third_party/")))
    assert not any(n.endswith((".js", ".css")) for n in names)
    assert not any(n.startswith(("tests/", "sweeps/", "examples/")) for n in names)  # nothing at the top level


def test_installed_copy_analyzes_and_finds_the_shipped_sweeps(installed, workdir):
    started = time.monotonic()
    proc = _run([installed / "ralp-bench", "analyze", "--model", "vgg16", "--workers", "8"], workdir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Predicted step: 8 workers x 32 images" in proc.stdout and "Plan: " in proc.stdout
    checkout = ralp_bench("analyze", "--model", "vgg16", "--workers", "8")
    assert proc.stdout == checkout.stdout  # the same code, the same numbers

    # custom-model.toml: a shipped sweep whose model is the shipped example, on the bundled MNIST
    proc = _run([installed / "ralp-bench", "sweep", "sweeps/custom-model.toml", "--dry-run", "--cluster", "local"],
                workdir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    site = next((installed.parent / "lib").glob("python3*/site-packages"))
    assert f"using the shipped {site / 'bench/shipped/sweeps/custom-model.toml'}" in proc.stderr
    example = f"{site / 'bench/shipped/examples/custom_cnn.py'}:build"
    assert [line.split()[:2] for line in proc.stdout.splitlines() if "step ~" in line] == \
        [[example, "ps"], [example, "horovod"], [example, "ralp"]]
    assert "3 runs; estimated at most" in proc.stdout

    proc = _run([installed / "ralp-bench", "sweep", "sweeps/no-such.toml", "--dry-run"], workdir)
    assert proc.returncode == 2 and "not found" in proc.stderr and "sweeps/headline.toml" in proc.stderr
    assert "Traceback" not in proc.stderr
    print(f"analyze + sweep --dry-run from the installed copy: {time.monotonic() - started:.0f} s")


def _doctor_lines(bin_dir, cwd):
    proc = _run([bin_dir / "ralp-bench", "doctor"], cwd)
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc.returncode, {line[7:24].strip(): line for line in proc.stdout.splitlines() if line.startswith("[")}


def test_doctor_names_horovod_as_the_one_extra_step_which_then_trains(installed, workdir):
    """Without Horovod doctor fails on it alone and names the fix; after the cached wheel's
    `pip install` it reports Horovod with MPI + Gloo, and a 2-rank Horovod run stores an ok row."""
    code, lines = _doctor_lines(installed, workdir)
    assert lines["TensorFlow"].startswith("[ok  ]") and "2.15.1" in lines["TensorFlow"]
    assert lines["Horovod"].startswith("[FAIL]") and "No module named 'horovod'" in lines["Horovod"]
    wheel = cached_horovod_wheel(TF_PIN.split("==")[1])  # ci/setup.sh's, for the pinned TensorFlow
    fix = f"pip install {wheel}" if wheel else 'README "Install as a package"'
    assert fix in lines["Horovod"]
    assert code == 1 and [name for name, line in lines.items() if line.startswith("[FAIL]")] == ["Horovod"]
    if wheel is None:
        pytest.skip("no cached Horovod wheel (ci/setup.sh builds it once); the extra step is not exercised")

    started = time.monotonic()
    proc = _run([installed / "python", "-m", "pip", "install", "-q", wheel], workdir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    _, lines = _doctor_lines(installed, workdir)
    assert lines["Horovod"].startswith("[ok  ]") and "controllers MPI+Gloo" in lines["Horovod"]

    results = workdir / "results"
    proc = _run([installed / "ralp-bench", "run", "--model", "lenet_mnist", "--dataset", "mnist", "--strategy",
                 "horovod", "--workers", "2", "--steps", "2", "--warmup-steps", "1", "--cluster", "local", "--quiet",
                 "--results", results], workdir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (table,) = (results / "runs").glob("*.csv")
    (row,) = csv.DictReader(table.open())
    assert (row["status"], row["strategy"], row["workers"], row["horovod_version"]) == \
        ("ok", "horovod", "2", HOROVOD_VERSION)
    print(f"Horovod step + doctor + a 2-rank run from the installed copy: {time.monotonic() - started:.0f} s")
