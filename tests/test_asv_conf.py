"""asv's commit workflow (asv.conf.json + ci/asv-install) and the history profile.

Why these checks: the asv env is built once from the matrix's exact pins, so a pin
that drifts from requirements.txt would measure every commit on other library
versions than the project runs on, silently. ci/asv-install is what makes an old
commit cheap (Horovod from the cached wheel, the project --no-deps); when the
wheel is missing it must say what to run, not start a source build. The history
profile must stay the cheap one a range of commits can afford.
"""
import json
import os
import re
import subprocess
import sys
import venv
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "benchmarks"
INSTALL = ROOT / "ci" / "asv-install"
# What bench, ralp and strategies import at run time (Horovod comes from ci/asv-install).
RUNTIME = {"tensorflow-cpu", "numpy", "mpi4py", "pandas", "pyarrow", "matplotlib", "rich"}


def _conf():
    from asv.util import load_json

    return load_json(str(ROOT / "asv.conf.json"), js_comments=True)


def _requirements():
    found = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            req = Requirement(line)
            found[req.name.lower()] = req
    return found


def test_matrix_pins_every_runtime_package_exactly_and_within_requirements():
    pins = _conf()["matrix"]["req"]
    assert RUNTIME <= set(pins), f"asv.conf.json's matrix lacks {sorted(RUNTIME - set(pins))}"
    required = _requirements()
    for name, version in pins.items():
        # asv turns "name X" into name==X but mangles ranges (">=a,<b" becomes ==a): exact pins only
        assert re.fullmatch(r"\d+(\.\d+)*", version), f"{name}: pin an exact version, not {version!r}"
        if name in required:
            assert required[name].specifier.contains(version), \
                f"asv.conf.json pins {name} {version}, requirements.txt says {required[name]}"


def test_each_commit_is_built_and_installed_without_dependencies():
    conf = _conf()
    assert conf["environment_type"] == "virtualenv" and conf["pythons"] == ["3.11"]
    assert "--no-deps" in conf["build_command"][0] and "--no-index" in conf["build_command"][0]
    assert conf["install_command"] == ["in-dir={env_dir} python {conf_dir}/ci/asv-install {wheel_file}"]
    text = INSTALL.read_text()
    assert '"--no-deps", "--no-index", "--force-reinstall", argv[0]' in text


def test_the_suite_is_asvs_default_benchmark_dir_outside_the_package():
    """asv imports benchmark_dir from the checkout while the measured commit's wheel is installed:
    a suite inside ``bench`` would ship in the wheel and sit beside the package it measures."""
    assert ROOT / _conf()["benchmark_dir"] == SUITE and (SUITE / "__init__.py").exists()
    assert not (ROOT / "bench" / "asv_bench").exists()


@pytest.fixture(scope="module")
def bare_env(tmp_path_factory):
    """A virtualenv without pip holding only tensorflow-cpu's metadata: what ci/asv-install
    reads to find the Horovod wheel built for that TensorFlow."""
    path = tmp_path_factory.mktemp("asv-env") / "env"
    venv.EnvBuilder(with_pip=False).create(path)
    site = next(path.glob("lib/python3*/site-packages"))
    meta = site / "tensorflow_cpu-2.15.1.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: tensorflow-cpu\nVersion: 2.15.1\n")
    return path / "bin" / "python"


def _install(python, *args, **env):
    return subprocess.run([str(python), str(INSTALL), *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **env})


def test_install_names_setup_when_the_horovod_wheel_is_missing(bare_env, tmp_path):
    proc = _install(bare_env, str(tmp_path / "ralp_bench-0.1.0-py3-none-any.whl"), RALP_CACHE=str(tmp_path))
    assert proc.returncode == 1
    wheel_dir = tmp_path / "wheels" / f"horovod-0.28.1-tf2.15.1-cp{sys.version_info[0]}{sys.version_info[1]}-cpu-mpi-gloo"
    assert proc.stderr.strip() == (f"asv-install: no Horovod wheel in {wheel_dir}; "
                                   "run ci/setup.sh first (it builds and caches it once)")


def test_install_refuses_wrong_use(bare_env, tmp_path):
    usage = _install(bare_env)
    assert usage.returncode == 1 and "usage: asv-install <project wheel>" in usage.stderr
    not_venv = subprocess.run([sys.base_prefix + "/bin/python3", str(INSTALL), "x.whl"], capture_output=True,
                              text=True, timeout=60)
    assert not_venv.returncode == 1 and "is not a virtual environment" in not_venv.stderr


def _discover(tmp_path, profile):
    from asv.runner import BENCHMARK_RUN_SCRIPT

    out = tmp_path / f"discovered-{profile}.json"
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "RALP_ASV_PROFILE": profile}
    proc = subprocess.run([sys.executable, BENCHMARK_RUN_SCRIPT, "discover", str(SUITE), str(out)],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {b["name"]: b for b in json.loads(out.read_text())}


def test_history_profile_trains_once_per_strategy_and_probes_no_links(tmp_path):
    history, fast = _discover(tmp_path, "history"), _discover(tmp_path, "fast")
    assert not any(n.startswith("bench_links.") for n in history)
    assert any(n.startswith("bench_links.") for n in fast)
    training = history["bench_training.MeasuredTraining.track_images_per_sec"]["params"]
    assert training[:3] == [["'alexnet_cifar'"], ["'ps'", "'ralp'"], ["2"]]
    assert set(history) - {n for n in fast if not n.startswith("bench_links.")} == set()


def test_step_time_figures_grow_when_training_slows_down():
    """asv counts larger as worse: the step-time twins of images/s and the speedup must grow on a slowdown."""
    os.environ.pop("RALP_ASV_PROFILE", None)
    from benchmarks import bench_training

    rows = {("m", s, 2): {"status": "ok", "failure": None, "images_per_sec": 64 / t, "step_time_median_s": t}
            for s, t in (("ps", 0.5), ("ralp", 0.25))}
    measured, speedup = bench_training.MeasuredTraining(), bench_training.RalpSpeedup()
    assert measured.track_step_time(rows, "m", "ps", 2, "local") == 0.5
    assert speedup.track_ralp_step_time_over_ps(rows, "m", 2, "local") == pytest.approx(0.5)
    assert speedup.track_speedup_ralp_over_ps(rows, "m", 2, "local") == pytest.approx(2.0)
    rows[("m", "ralp", 2)]["step_time_median_s"] = None
    with pytest.raises(RuntimeError, match="timed no steps"):
        speedup.track_ralp_step_time_over_ps(rows, "m", 2, "local")
