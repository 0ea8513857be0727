"""Each rank's GPU (issue 37, item 2), checked without a GPU: the device every rank of a real
placement gets for 1, 4 and 8 GPUs per host under every layout, the ConfigProto a TF server is
started with, the refusal when a host's computing ranks outnumber its GPUs, and a CPU host left
exactly as before.

Placements come from bench/launch/base.py ``place_ranks`` for the hostfile
``h0 slots=2, h1 slots=4, h2 slots=4`` (and others), as a hosts-mode run would place them.
Expected devices are written out by hand from the rule in bench/rank/gpu.py's docstring.
"""
import json
import subprocess
import sys

import pytest

from bench.core.config import RunConfig
from bench.core.errors import UserError
from bench.core.roles import RankLayout
from bench.core.strategy_specs import spec_of
from bench.launch.base import place_ranks
from bench.rank.gpu import LOCAL_RANK_VARIABLES, GpuChoice, choose_gpu, host_gpus, local_rank
from tests.conftest import ROOT

HOSTFILE = [2, 4, 4]  # h0 slots=2, h1 slots=4, h2 slots=4
_ = None  # no GPU: the rank is hidden from every GPU


def placement(strategy, slots, workers, ps_placement="dedicated", layout_of=None):
    """(roles, host of each rank) for ``strategy`` placed on hosts with ``slots``; None: every
    rank on this machine (--cluster local)."""
    cfg = RunConfig(strategy=strategy, workers=workers, ps_placement=ps_placement).validate()
    layout = RankLayout.for_run(cfg, layout_of or strategy)
    counts = [layout.world] if slots is None else place_ranks(layout, slots)
    hosts = [f"h{h}" for h, n in enumerate(counts) for _ in range(n)]
    return [layout.role(r) for r in range(layout.world)], hosts


def devices(strategy, slots, workers, gpus, ps_placement="dedicated", layout_of=None, environ=None):
    roles, hosts = placement(strategy, slots, workers, ps_placement, layout_of)
    spec = spec_of(strategy)
    return [choose_gpu(r, roles, hosts, spec, gpus, environ or {}).index for r in range(len(roles))]


# ---- who gets which GPU --------------------------------------------------------------------

@pytest.mark.parametrize("gpus", [4, 8])
@pytest.mark.parametrize("strategy, expected", [
    # h0: chief, ps 0 | h1: workers 0-3 | h2: workers 4-7
    ("ps", [_, _, 0, 1, 2, 3, 0, 1, 2, 3]),
    ("ps-async", [_, _, 0, 1, 2, 3, 0, 1, 2, 3]),
    ("ralp", [_, 0, 0, 1, 2, 3, 0, 1, 2, 3]),          # RALP's FC head runs on ps 0
    ("ralp-hybrid", [_, 0, 0, 1, 2, 3, 0, 1, 2, 3]),
    ("horovod", [0, 1, 2, 3, 0, 1, 2, 3]),             # workers only, on h1 and h2
])
def test_workers_take_distinct_gpus_of_their_host_and_only_a_computing_ps_gets_one(strategy, expected, gpus):
    assert devices(strategy, HOSTFILE, 8, gpus) == expected


@pytest.mark.parametrize("gpus", [4, 8])
def test_colocated_ps_tasks_get_no_gpu_and_their_workers_do(gpus):
    # h0: chief alone | h1: (ps 0, w 0) .. (ps 3, w 3) | h2: (ps 4, w 4) .. (ps 7, w 7)
    assert devices("ps", [1, 4, 4], 8, gpus, "colocated") == [_] + [_, 0, _, 1, _, 2, _, 3] * 2


def test_eight_gpus_on_one_host_hold_a_whole_local_run():
    """--cluster local: every rank on one machine, so PS 0 and the workers share its GPUs."""
    assert devices("ralp", None, 7, 8) == [_, 0, 1, 2, 3, 4, 5, 6, 7]
    assert devices("ps", None, 8, 8) == [_, _, 0, 1, 2, 3, 4, 5, 6, 7]
    assert devices("horovod", None, 8, 8) == list(range(8))
    assert devices("ps", None, 4, 8, "colocated") == [_, _, 0, _, 1, _, 2, _, 3]
    assert devices("ps", [1, 8], 8, 8, "colocated") == [_] + [g for i in range(8) for g in (_, i)]


@pytest.mark.parametrize("gpus", [1, 4, 8])
def test_single_process_takes_the_first_gpu_of_the_first_worker_host(gpus):
    assert devices("single", HOSTFILE, 8, gpus) == [0]


def test_one_gpu_per_host_holds_one_worker_per_host():
    # h0: chief, ps 0 | h1: worker 0 | h2: worker 1
    assert devices("ps", [2, 1, 1], 2, 1) == [_, _, 0, 0]
    assert devices("ralp", [2, 1, 1], 2, 1) == [_, 0, 0, 0]
    assert devices("horovod", [2, 1, 1], 2, 1) == [0, 0]


def test_horovod_launched_in_the_tf_layout_gives_no_gpu_to_the_ranks_that_sit_out():
    """``auto`` launches the TF layout and may pick Horovod: chief and PS ranks then idle."""
    assert devices("horovod", HOSTFILE, 8, 4, layout_of="ralp") == [_, _, 0, 1, 2, 3, 0, 1, 2, 3]


@pytest.mark.parametrize("strategy, host, needed", [("ps", "h1", 4), ("ralp", "h1", 4), ("horovod", "h1", 4),
                                                    ("ps-colocated", "h1", 4)])
def test_more_computing_ranks_on_a_host_than_gpus_is_refused_in_one_line(strategy, host, needed):
    name, placed = ("ps", "colocated") if strategy == "ps-colocated" else (strategy, "dedicated")
    with pytest.raises(UserError) as err:
        devices(name, [1, 4, 4] if placed == "colocated" else HOSTFILE, 8, 1, placed)
    message = str(err.value)
    assert "\n" not in message
    assert f"host {host} has 1 GPU(s) for {needed} computing ranks" in message
    assert "at most 1 worker slots" in message and "more GPUs" in message


def test_a_ps_running_the_head_counts_against_its_hosts_gpus():
    """On one 8-GPU machine ralp's PS 0 needs a GPU too: 8 workers + the head are 9."""
    with pytest.raises(UserError, match="8 GPU\\(s\\) for 9 computing ranks"):
        devices("ralp", None, 8, 8)
    assert devices("ps", None, 8, 8)[2:] == list(range(8))  # sync PS keeps its variables on the CPU


# ---- a CPU host is left alone ----------------------------------------------------------------

@pytest.mark.parametrize("strategy", ["ps", "ps-async", "ralp", "ralp-hybrid", "horovod", "single"])
def test_without_gpus_nothing_changes(strategy):
    roles, hosts = placement(strategy, HOSTFILE, 8)
    garbage = {"OMPI_COMM_WORLD_LOCAL_RANK": "x", "CUDA_VISIBLE_DEVICES": "0,1"}  # not even read
    for r in range(len(roles)):
        choice = choose_gpu(r, roles, hosts, spec_of(strategy), 0, garbage)
        assert choice == GpuChoice(None, 0) and choice.cpu_host and choice.config_fields() == {}


def test_select_gpu_on_this_cpu_machine_leaves_tensorflow_as_it_was():
    tf = pytest.importorskip("tensorflow")
    from bench.rank.main import _select_gpu
    from bench.core.roles import Role
    from bench.rank.tf_cluster import ClusterInfo

    if tf.config.list_physical_devices("GPU"):
        pytest.skip("this machine has GPUs")
    before = tf.config.get_visible_devices()
    info = ClusterInfo(0, 1, ["127.0.0.1"], {}, loopback=True)
    assert _select_gpu(tf, spec_of("single"), [Role("worker", 0)], info) == GpuChoice(None, 0)
    assert tf.config.get_visible_devices() == before


# ---- what a TF server is started with --------------------------------------------------------

def test_config_fields_give_a_server_its_gpu_and_hide_the_others():
    tf = pytest.importorskip("tensorflow")

    def proto(choice):
        return tf.compat.v1.ConfigProto(intra_op_parallelism_threads=3, inter_op_parallelism_threads=2,
                                        **choice.config_fields())

    cpu = proto(GpuChoice(None, 0))
    assert cpu == tf.compat.v1.ConfigProto(intra_op_parallelism_threads=3, inter_op_parallelism_threads=2)
    worker = proto(GpuChoice(5, 8))
    assert worker.gpu_options.visible_device_list == "5" and worker.gpu_options.allow_growth
    assert "GPU" not in worker.device_count
    hidden = proto(GpuChoice(None, 8))
    # "" would mean every GPU to TensorFlow: a hidden rank is hidden by a GPU count of 0
    assert dict(hidden.device_count) == {"GPU": 0} and hidden.gpu_options.visible_device_list == ""
    assert hidden.gpu_options.allow_growth


_SERVER = """
import json, os, sys
from bench.core.roles import Role
from bench.rank.gpu import GpuChoice
from bench.rank.tf_cluster import ClusterInfo, reserve_port, start_server
out = {}
for name, choice in (("cpu", None), ("gpu3", GpuChoice(3, 4)), ("hidden", GpuChoice(None, 4))):
    s = reserve_port(); port = s.getsockname()[1]; s.close()
    info = ClusterInfo(0, 1, ["127.0.0.1"], {"worker": [f"127.0.0.1:{port}"]}, loopback=True)
    c = start_server(info, Role("worker", 0), 2, 1, choice).server_def.default_session_config
    out[name] = [c.intra_op_parallelism_threads, c.inter_op_parallelism_threads, dict(c.device_count),
                 c.gpu_options.visible_device_list, c.gpu_options.allow_growth]
print(json.dumps(out)); sys.stdout.flush(); os._exit(0)  # TF servers cannot be stopped
"""


def test_start_server_gives_the_server_the_ranks_gpu_choice():
    """The real start_server, three servers in one process: the ConfigProto each one was built from."""
    pytest.importorskip("tensorflow")
    proc = subprocess.run([sys.executable, "-c", _SERVER], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got == {"cpu": [2, 1, {}, "", False],                 # exactly today's proto
                   "gpu3": [2, 1, {}, "3", True],
                   "hidden": [2, 1, {"GPU": 0}, "", True]}


# ---- the inputs: local rank and the host's GPU count ------------------------------------------

def test_local_rank_precedence_puts_the_launchers_own_variable_before_slurms():
    assert local_rank({}) is None
    for name in LOCAL_RANK_VARIABLES:
        assert local_rank({name: "3"}) == (name, 3)
    # an mpirun inside a Slurm allocation: every rank inherits the batch step's SLURM_LOCALID=0
    assert local_rank({"SLURM_LOCALID": "0", "OMPI_COMM_WORLD_LOCAL_RANK": "2"}) == ("OMPI_COMM_WORLD_LOCAL_RANK", 2)
    assert local_rank({"SLURM_LOCALID": "0", "PMI_LOCAL_RANK": "1"}) == ("PMI_LOCAL_RANK", 1)
    assert LOCAL_RANK_VARIABLES[0] == "OMPI_COMM_WORLD_LOCAL_RANK" and LOCAL_RANK_VARIABLES[-1] == "SLURM_LOCALID"
    with pytest.raises(UserError, match="PMIX_LOCAL_RANK='a'"):
        local_rank({"PMIX_LOCAL_RANK": "a"})


def test_the_launchers_local_rank_must_match_the_ranks_place_on_its_host():
    roles, hosts = placement("ps", HOSTFILE, 8)
    positions = [hosts[:r].count(hosts[r]) for r in range(len(hosts))]  # 0,1 | 0..3 | 0..3
    assert positions == [0, 1, 0, 1, 2, 3, 0, 1, 2, 3]
    spec = spec_of("ps")
    for r, p in enumerate(positions):
        assert choose_gpu(r, roles, hosts, spec, 4, {"OMPI_COMM_WORLD_LOCAL_RANK": str(p)}).index == \
            [_, _, 0, 1, 2, 3, 0, 1, 2, 3][r]
    with pytest.raises(UserError, match="SLURM_LOCALID=0, but it is local rank 2 of the 4 ranks at h1"):
        choose_gpu(4, roles, hosts, spec, 4, {"SLURM_LOCALID": "0"})


@pytest.mark.parametrize("listed, detected, expected", [
    (None, 8, 8), (None, 0, 0), ("0,1", 8, 2), ("", 8, 0), ("-1", 8, 0), ("0,-1,2", 8, 1),
    ("GPU-1a2b,GPU-3c4d", 4, 2), ("0,1,2,3", 2, 2), ("0,1", 0, 0)])
def test_host_gpus_honours_cuda_visible_devices(listed, detected, expected):
    environ = {} if listed is None else {"CUDA_VISIBLE_DEVICES": listed}
    assert host_gpus(detected, environ) == expected
