"""Where ranks and variables go: PS layouts, the one-process reference, greedy sharding.

The cost model prices each PS task's share with the same rule TensorFlow's placement
uses (ralp/sharding.py); a subprocess with four logical CPU devices checks that the
variables really land as the rule says, so predicted and measured bytes per host
cannot drift apart silently.
"""
import json
import subprocess
import sys

import pytest

from bench.core.config import RunConfig
from bench.core.errors import UserError
from bench.core.roles import RankLayout
from bench.launch.base import place_ranks
from ralp.sharding import shard_loads
from tests.conftest import ROOT


def test_greedy_sharding_by_hand():
    # 10 -> task 0; 3 -> task 1 (0 < 10); 4 -> task 1 (3 < 10); 8 -> task 1 (7 < 10); 1 -> task 0 (10 < 15)
    assert shard_loads([10, 3, 4, 8, 1], 2) == [11, 15]
    assert shard_loads([5, 5, 5], 1) == [15]
    assert shard_loads([], 3) == [0, 0, 0]
    with pytest.raises(ValueError):
        shard_loads([1], 0)


def test_colocated_layout_pairs_a_ps_task_with_each_worker_on_its_host():
    cfg = RunConfig(strategy="ps", workers=3, ps_placement="colocated").validate()
    layout = RankLayout.for_run(cfg, "ps")
    assert (layout.ps, layout.world, layout.colocated) == (3, 7, True)
    roles = [str(layout.role(r)) for r in range(layout.world)]
    assert roles == ["chief 0", "ps 0", "worker 0", "ps 1", "worker 1", "ps 2", "worker 2"]
    counts = place_ranks(layout, [1, 1, 1, 1])  # host 0 (the PS host of the other strategies) + 3 worker hosts
    assert counts == [1, 2, 2, 2]
    # ranks fill hosts in order: host h >= 1 gets ranks 2h-1 (ps h-1) and 2h (worker h-1)
    assert [str(layout.role(r)) for r in (1, 2)] == ["ps 0", "worker 0"]


def test_colocated_applies_to_sync_ps_only():
    cfg = RunConfig(strategy="ralp", workers=2, ps_placement="colocated").validate()
    for strategy, tasks in (("ralp", 1), ("ps-async", 1), ("ps", 2)):
        assert cfg.ps_tasks(strategy) == tasks
    assert place_ranks(RankLayout.for_run(cfg, "ralp"), [1, 1, 1]) == [2, 1, 1]
    assert place_ranks(RankLayout.for_run(cfg, "horovod"), [1, 1, 1]) == [0, 1, 1]


def test_single_reference_is_one_rank_on_the_first_worker_host():
    cfg = RunConfig(strategy="single", workers=4).validate()
    layout = RankLayout.for_run(cfg, "single")
    assert layout.world == 1 and place_ranks(layout, [1] * 5) == [0, 1, 0, 0, 0]
    assert cfg.images_per_step("single") == cfg.batch_size and cfg.images_per_step("ps") == 4 * cfg.batch_size


@pytest.mark.parametrize("kwargs, message", [
    (dict(ps_placement="colocated", ps=2), "drop --ps 2"),
    (dict(ps_placement="sideways"), "--ps-placement must be one of dedicated, colocated"),
    (dict(strategy="single", compression="fp16"), "single does not support --compression"),
])
def test_bad_layouts_are_refused(kwargs, message):
    with pytest.raises(UserError, match=message):
        RunConfig(**kwargs).validate()


_PLACEMENT = r"""
import json, sys
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 4)
from bench.core.config import RunConfig
from strategies.base import StrategyContext
from strategies.ps import SyncPS
devices = [d.name for d in tf.config.list_logical_devices("CPU")]
strategy = SyncPS(StrategyContext(RunConfig(model=sys.argv[1]), shards=None, ps_devices=devices))
strategy.build_model()
load = {d.split("device:")[-1]: 0 for d in devices}
for v in strategy.model.variables:
    load[v.device.split("device:")[-1]] += int(v.shape.num_elements())
slots_beside = all(m.device == v.device for v, m in zip(strategy.optimizer.variables, strategy.optimizer.slots))
print(json.dumps({"load": list(load.values()), "slots_beside": slots_beside}))
"""


@pytest.mark.parametrize("model", ["alexnet_cifar", "resnet_cifar"])
def test_tensorflow_places_variables_as_the_cost_model_shards_them(model):
    """resnet_cifar is functional: it creates variables in call order, not in layer order."""
    from bench.driver.planning import model_profile

    proc = subprocess.run([sys.executable, "-c", _PLACEMENT, model], capture_output=True, text=True, cwd=ROOT,
                          timeout=300, env={"TF_CPP_MIN_LOG_LEVEL": "2", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    placed = json.loads(proc.stdout.strip().splitlines()[-1])
    assert placed["load"] == shard_loads(model_profile(model).variable_sizes, 4)
    assert placed["slots_beside"]  # each momentum buffer on its variable's task, not dealt by the rule


def test_a_rank_that_raised_is_named_with_its_exception():
    """mpirun says which rank exited; the rank's own last exception line says why (a failed row
    that only said 'exited with code 1' sent people to rerun it by hand to find out)."""
    from bench.launch.base import diagnose
    from bench.core.roles import RankLayout

    exited = ("\n  Process name: [[123,1],0]\n  Exit code:    1\n")
    raised = ("Traceback (most recent call last):\n  File \"x.py\", line 3, in <module>\n"
              "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor\n")
    layout = RankLayout(2, 1, tf=False)
    assert diagnose(raised + exited, layout) == ("rank 0 (worker 0) exited with code 1; last error: tensorflow.python."
                                                 "framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor")
    assert diagnose(exited, layout) == "rank 0 (worker 0) exited with code 1"
    # TF's op errors end in "Graph execution error:"; the cause is the transport's own line.
    graph = ("[1,0]<stderr>:[2026-12-03 19:02:11.5: E horovod/common/operations.cc:697] Horovod background loop "
             "uncaught exception: [third_party/gloo/gloo/transport/tcp/pair.cc:589] Timed out waiting 30000ms "
             "for recv operation to complete\n"
             "tensorflow.python.framework.errors_impl.UnknownError: Graph execution error:\n\nDetected at node x\n")
    assert diagnose(graph + exited, layout) == (
        "rank 0 (worker 0) exited with code 1; last error: tensorflow.python.framework.errors_impl.UnknownError: "
        "Graph execution error: Timed out waiting 30000ms for recv operation to complete")


def _memory_group(name: str):
    """A memory cgroup of ours (v1 or v2) to run a process in, or None where there is none."""
    import os

    from bench.launch import cgroups

    v2 = cgroups._v2_root()
    if v2 is None and os.path.isdir("/sys/fs/cgroup/memory"):
        path = f"/sys/fs/cgroup/memory/{name}"
        os.mkdir(path)
        return path, "memory.limit_in_bytes"
    if v2 is not None and "memory" in open(os.path.join(v2, "cgroup.controllers")).read().split():
        with open(os.path.join(v2, "cgroup.subtree_control"), "w") as f:
            f.write("+memory")
        path = os.path.join(v2, name)
        os.mkdir(path)
        return path, "memory.max"
    return None


def test_a_rank_the_kernel_killed_for_memory_is_named_so():
    """Tuned Horovod on VGG-16 at 8 workers (2026-12-07) failed as "rank 4 (worker 4) died (SIGKILL)":
    the kernel's out-of-memory killer had ended it (eight ranks of ~3.2 GB on a 23 GiB machine). A real
    OOM kill, of a process over a 64 MiB memory group's limit, is found in the kernel's log by its PID
    after the launch began, and the failure says so and names the fix; a live process, a kill from
    before the launch and a launcher whose ranks are on other machines say nothing of memory."""
    import os
    import time

    from bench.launch import kernel_log
    from bench.launch.base import diagnose

    if os.geteuid() != 0 or not os.access("/dev/kmsg", os.R_OK):
        pytest.skip("needs root and the kernel's log (/dev/kmsg): a memory cgroup, the OOM killer's record")
    before = time.monotonic() - 5.0
    group = _memory_group(f"ralp-oomtest-{os.getpid()}")
    if group is None:
        pytest.skip("no memory cgroup controller on this machine")
    path, limit = group
    try:
        with open(os.path.join(path, limit), "w") as f:
            f.write(str(64 << 20))
        since = time.monotonic()
        child = subprocess.Popen([sys.executable, "-c", "import os, sys; open(sys.argv[1], 'w').write(str(os.getpid()));"
                                  " b = bytearray(512 << 20)", os.path.join(path, "cgroup.procs")])
        assert child.wait(timeout=60) == -9
    finally:
        os.rmdir(path)
    assert kernel_log.oom_killed(child.pid, since)
    assert not kernel_log.oom_killed(child.pid, time.monotonic() + 5.0)   # a kill before the launch began
    assert not kernel_log.oom_killed(os.getpid(), before)

    mpirun = f"mpirun noticed that process rank 2 with PID {child.pid} on node 10.213.0.15 exited on signal 9 (Killed).\n"
    named = diagnose(mpirun, RankLayout(2, 1), lambda pid: kernel_log.oom_killed(pid, since))
    assert named.startswith("rank 2 (worker 0) died (SIGKILL): the kernel's out-of-memory killer ended it; this "
                            "machine's ") and named.endswith("run fewer workers, a smaller model or batch here, or on "
                                                              "separate hosts")
    assert diagnose(mpirun, RankLayout(2, 1)) == "rank 2 (worker 0) died (SIGKILL)"


def test_a_rank_whose_death_mpirun_did_not_report_is_named_from_the_chiefs_error():
    """Open MPI 4.1 sometimes loses its own "exited on signal" notice (it prints an ORTE_ERROR_LOG
    from show_help.c instead; once in a suite, rank 3 SIGKILLed): the chief's gRPC error still
    names the task it could no longer reach, which the layout turns into a rank."""
    from bench.launch.base import diagnose
    from bench.core.roles import RankLayout

    chief = ("[1,0]<stderr>:  File \"/w/strategies/ps.py\", line 60, in train_step\n"
             "tensorflow.python.framework.errors_impl.UnavailableError: failed to connect to all addresses\n"
             "Additional GRPC error information from remote target /job:worker/replica:0/task:1/device:CPU:0 "
             "while calling /tensorflow.eager.EagerService/Enqueue:\n:{\"created\":\"@1796551011.500733763\"}\n")
    lost = ("[vm:01234] [[70582,0],0] ORTE_ERROR_LOG: Data unpack had inadequate space in file "
            "../../../orte/util/show_help.c at line 513\n")
    assert diagnose(chief + lost, RankLayout(2, 1)) == (
        "rank 3 (worker 1) is gone: TensorFlow could not reach it (failed to connect to all addresses)")
    # colocated: worker 1 is rank 4; a layout without that task falls back to mpirun's own lines
    assert diagnose(chief + lost, RankLayout(2, 2, colocated=True)).startswith("rank 4 (worker 1) is gone")
    assert diagnose(chief + lost, RankLayout(1, 1)).startswith("mpirun failed: ")
    assert diagnose(chief + lost, RankLayout(2, 1, tf=False)).startswith("mpirun failed: ")
    # the chief's failed call, then its own abort of the job: the vanished task is still the cause
    aborted = ("MPI_ABORT was invoked on rank 0 in communicator MPI_COMM_WORLD\n")
    reset = chief.replace("failed to connect to all addresses", "Connection reset by peer")
    assert diagnose(reset + aborted, RankLayout(2, 1)) == (
        "rank 3 (worker 1) is gone: TensorFlow could not reach it (Connection reset by peer)")


def test_gloo_waits_as_long_as_the_harness_watchdog():
    """Gloo's per-operation limit (30 s by default) failed VGG-16's 411 MB broadcast on a 105.7 Mbit/s
    link (~32 s at line rate); it now follows the watchdog's warm-up window, never below 30 s."""
    from bench.core.config import RunConfig
    from bench.rank.hvd_init import gloo_timeout_s

    def window(step_timeout, warmup_steps):
        return RunConfig(step_timeout=step_timeout, warmup_steps=warmup_steps).warmup_window_s

    assert gloo_timeout_s(window(900.0, 1)) == 2700   # the paper sweep: 900 s steps, 1 warm-up step
    assert gloo_timeout_s(window(120.0, 2)) == 480    # the defaults
    assert gloo_timeout_s(window(2.0, 0)) == 30       # never below Horovod's own default
    fc6_bytes, link_bps = 25088 * 4096 * 4, 105.7e6
    assert gloo_timeout_s(window(120.0, 0)) > fc6_bytes * 8 / link_bps > 30


def test_a_setup_that_broadcasts_the_model_may_take_the_broadcast():
    """Run 20261207T193259Z-4166d6 (tuned Horovod, VGG-16 at 8 workers, 29.7 Mbit/s links, --step-timeout
    900) failed in setup: Gloo's binomial-tree broadcast posts each rank's sends at once, so rank 0's 3
    copies share its link, then its first child's 2, then 1: 6 copies' time before the last rank has
    the model. Without the momentum slots (zero everywhere, no longer sent) that is 6 x 553 MB, ~900 s
    at line rate; the setup window now adds the broadcast's share to the start-up's, here and in the
    driver's deadline, and only for strategies that broadcast."""
    from bench.core.config import RunConfig
    from bench.driver.harness import deadline_for

    vgg16_bytes, link_bps, predicted_step_s = 138_357_544 * 4, 29.7e6, 284.7
    broadcast_s = (3 + 2 + 1) * vgg16_bytes * 8 / link_bps
    horovod = RunConfig(strategy="horovod", workers=8, step_timeout=predicted_step_s)
    assert horovod.setup_window_s > 300 + broadcast_s                  # start-up and the broadcast
    assert RunConfig(strategy="horovod", workers=8, step_timeout=900.0).setup_window_s > 900 + broadcast_s
    assert RunConfig(strategy="ralp", workers=8, step_timeout=900.0).setup_window_s == 900.0
    assert RunConfig(strategy="horovod", workers=1, step_timeout=900.0).setup_window_s == 900.0
    ralp = RunConfig(strategy="ralp", workers=8, step_timeout=predicted_step_s)
    assert deadline_for(horovod) - deadline_for(ralp) == pytest.approx(horovod.broadcast_window_s)


def test_verbose_echo_says_when_each_rank_reached_each_phase(capsys):
    """--verbose: every rank's output, and each start-up phase with the seconds since launch,
    so a slow start shows where it goes (TF import under a host's CPU cap, tracing, ...)."""
    import io
    import re
    from types import SimpleNamespace

    from bench.launch.base import _pump

    out = io.StringIO("RALP-PHASE 0 planning\nhello from rank 1\nRALP-PHASE 1 training"
                      "RALP-PHASE 0 training\nRALP-PROGRESS 1 3\n")
    lines, phases, progress = [], {}, []
    _pump(SimpleNamespace(stdout=out), lines, phases, lambda a, b: progress.append((a, b)), True, io.StringIO())
    echoed = capsys.readouterr().err.splitlines()
    timed = re.compile(r"^\[ *\d+\.\ds\] ")
    assert [timed.sub("", e) for e in echoed] == ["rank 0: planning", "hello from rank 1", "rank 1: training",
                                                  "rank 0: training"]
    assert [bool(timed.match(e)) for e in echoed] == [True, False, True, True]
    assert phases == {0: "training", 1: "training"} and progress == [(1, 3)] and lines == ["hello from rank 1\n"]
