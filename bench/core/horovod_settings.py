"""Horovod's knobs, as the settings a run states and the environment Horovod 0.28 reads at
hvd.init(), and the label a row records them under.

Why apart from bench/rank/hvd_init.py (which starts Horovod on the ranks): the driver writes the
label and checks the settings before any rank starts, and must not import what loads Horovod."""


def tuning_env(fusion_mb: float = 128.0, cycle_ms: float = 1.0, autotune: bool = False,
               hierarchical: bool = False) -> dict:
    """Horovod's knobs as the environment it reads at hvd.init()."""
    env = {"HOROVOD_FUSION_THRESHOLD": str(int(fusion_mb * 1024 * 1024)), "HOROVOD_CYCLE_TIME": f"{cycle_ms:g}"}
    if autotune:
        env["HOROVOD_AUTOTUNE"] = "1"
    if hierarchical:
        env["HOROVOD_HIERARCHICAL_ALLREDUCE"] = "1"
    return env


def settings_label(ops: str, fusion_mb: float, cycle_ms: float, autotune: bool, hierarchical: bool = False) -> str:
    """What a row records: 'gloo fusion=128MiB cycle=1ms autotune=off' (+ ' hierarchical')."""
    return (f"{ops} fusion={fusion_mb:g}MiB cycle={cycle_ms:g}ms autotune={'on' if autotune else 'off'}"
            + (" hierarchical" if hierarchical else ""))


HIERARCHICAL_NEEDS_NCCL = ("--horovod-hierarchical needs Horovod built with NCCL (HOROVOD_GPU_OPERATIONS=NCCL: "
                           "ci/setup.sh --gpu on GPU hosts); this Horovod has CPU collectives only, where the "
                           "hierarchical all-reduce does not exist")
