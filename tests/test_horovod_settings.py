"""Horovod's knobs reach its ranks as the variables Horovod 0.28 reads at hvd.init(), and the row
says which were on (bench/core/horovod_settings.py)."""
from bench.core.horovod_settings import settings_label, tuning_env


def test_tuning_env_is_what_horovod_reads():
    assert tuning_env() == {"HOROVOD_FUSION_THRESHOLD": str(128 * 1024 * 1024), "HOROVOD_CYCLE_TIME": "1"}
    env = tuning_env(64, 5, autotune=True, hierarchical=True)
    assert env["HOROVOD_FUSION_THRESHOLD"] == str(64 * 1024 * 1024) and env["HOROVOD_CYCLE_TIME"] == "5"
    assert env["HOROVOD_AUTOTUNE"] == "1" and env["HOROVOD_HIERARCHICAL_ALLREDUCE"] == "1"


def test_the_row_names_the_hierarchical_all_reduce():
    assert settings_label("gloo", 128, 1, False) == "gloo fusion=128MiB cycle=1ms autotune=off"
    assert settings_label("mpi", 64, 5, True, hierarchical=True) == "mpi fusion=64MiB cycle=5ms autotune=on hierarchical"
