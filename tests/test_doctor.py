"""doctor's verdict on a host's GPU stack, and the GPU columns of every row (issue 37, item 3).

No GPU here: the verdicts are checked on simulated facts (a pure function of them), and the
facts this machine really has are checked against TensorFlow's and Horovod's own answers.
"""
import shutil
import subprocess
import sys

import pandas as pd
import pytest

from bench.commands import doctor
from bench.commands.doctor import gpu_verdict
from bench.store.environment import gpu_fields, horovod_nccl_code, nccl_version, tf_build_info
from bench.store.schema import FIELD_TYPES, coerce_frame, new_row
from tests.conftest import ROOT

NCCL_2_18_3 = 21803  # NCCL_VERSION_CODE: 2*10000 + 18*100 + 3


# ---- the verdict, simulated ------------------------------------------------------------------

def test_cpu_only_tensorflow_with_gpus_visible_fails_naming_the_fix():
    ok, detail = gpu_verdict(4, tf_cuda=False, nccl_code=NCCL_2_18_3)
    assert ok is False and "4 GPU(s) visible" in detail and "TensorFlow is CPU-only" in detail
    assert "tensorflow[and-cuda]==2.15.1" in detail and "no NCCL" not in detail


def test_horovod_without_nccl_with_gpus_visible_fails_naming_the_fix():
    ok, detail = gpu_verdict(8, tf_cuda=True, nccl_code=0)
    assert ok is False and "Horovod has no NCCL" in detail and "HOROVOD_GPU_OPERATIONS=NCCL" in detail
    assert "CPU-only" not in detail


def test_both_missing_are_both_named_on_one_line():
    ok, detail = gpu_verdict(2, tf_cuda=False, nccl_code=0)
    assert ok is False and "CPU-only" in detail and "no NCCL" in detail and "\n" not in detail


def test_a_gpu_stack_that_is_complete_passes():
    ok, detail = gpu_verdict(8, tf_cuda=True, nccl_code=NCCL_2_18_3)
    assert ok is True and "8 GPU(s)" in detail and "NCCL 2.18.3" in detail


@pytest.mark.parametrize("tf_cuda, nccl_code", [(False, 0), (True, NCCL_2_18_3), (None, None)])
def test_without_gpus_nothing_is_required(tf_cuda, nccl_code):
    ok, detail = gpu_verdict(0, tf_cuda, nccl_code)
    assert ok is None and "no GPU" in detail  # n/a: does not fail doctor, as before


def test_what_cannot_be_imported_is_left_to_its_own_check():
    assert gpu_verdict(4, tf_cuda=None, nccl_code=None)[0] is True


def test_a_failed_gpu_verdict_fails_doctor(monkeypatch, capsys):
    """doctor's own failure mechanism (exit 1, a FAIL line), fed simulated facts."""
    monkeypatch.setattr(doctor, "CHECKS", [("GPU stack", doctor._gpu_stack)])
    monkeypatch.setattr(doctor, "_gpu_facts", lambda: (4, False, 0))
    assert doctor.run(None) == 1
    out = capsys.readouterr().out
    assert "[FAIL] GPU stack" in out and "1 check(s) failed" in out
    monkeypatch.setattr(doctor, "_gpu_facts", lambda: (0, False, 0))
    assert doctor.run(None) == 0
    assert "[n/a ] GPU stack" in capsys.readouterr().out


def test_this_machines_facts_are_tensorflows_and_horovods_own():
    tf = pytest.importorskip("tensorflow")
    hvd = pytest.importorskip("horovod.tensorflow")
    gpus, tf_cuda, nccl_code = doctor._gpu_facts()
    assert tf_cuda == tf.test.is_built_with_cuda() and nccl_code == hvd.nccl_built()
    assert gpus >= len(tf.config.list_physical_devices("GPU"))


# ---- the rows --------------------------------------------------------------------------------

@pytest.mark.parametrize("code, version", [(NCCL_2_18_3, "2.18.3"), (22105, "2.21.5"), (20900, "2.9.0"),
                                           (2708, "2.7.8"), (0, None), (None, None)])
def test_nccl_version_code_decodes_both_encodings(code, version):
    assert nccl_version(code) == version


def test_build_info_is_read_as_tensorflow_reports_it_without_importing_it():
    tf = pytest.importorskip("tensorflow")
    assert tf_build_info() == dict(tf.sysconfig.get_build_info())


def test_nccl_code_is_what_horovod_reports():
    hvd = pytest.importorskip("horovod.tensorflow")
    assert horovod_nccl_code() == hvd.nccl_built()


def test_gpu_fields_on_this_machine_are_honest():
    """No GPU, CPU-only TensorFlow, Horovod without NCCL: 0, None and False, not guesses."""
    tf = pytest.importorskip("tensorflow")
    hvd = pytest.importorskip("horovod.tensorflow")
    if shutil.which("nvidia-smi") or tf.test.is_built_with_cuda() or hvd.nccl_built():
        pytest.skip("a GPU stack is installed here")
    assert gpu_fields() == {"gpus": 0, "gpu_model": None, "cuda_version": None, "cudnn_version": None,
                            "nccl_version": None, "nccl_built": False}


def test_gpu_fields_import_no_tensorflow():
    code = ("import sys; from bench.store.environment import gpu_fields; gpu_fields(); "
            "assert 'tensorflow' not in sys.modules and 'horovod' not in sys.modules")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_rows_carry_the_gpu_columns_and_older_files_read_them_as_empty():
    columns = ("gpu_model", "cuda_version", "cudnn_version", "nccl_version", "nccl_built")
    assert all(c in FIELD_TYPES for c in columns) and FIELD_TYPES["nccl_built"] == "bool"
    row = new_row(gpus=8, gpu_model="NVIDIA H100 80GB HBM3", cuda_version="12.2", cudnn_version="8",
                  nccl_version="2.18.3", nccl_built="true")
    assert row["gpus"] == 8 and row["nccl_built"] is True and row["cuda_version"] == "12.2"
    old = coerce_frame(pd.DataFrame([{"model": "lenet_mnist", "strategy": "ps", "gpus": 0}]))
    assert old[list(columns)].isna().all().all() and old["gpus"].iloc[0] == 0
