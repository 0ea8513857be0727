"""Runs on the emulated cluster: bytes on the wire, and nothing left behind.

Needs root and network namespaces (skipped with the reason otherwise).
"""
import os
import re
import signal
import time

import pytest

from bench.core.config import RunConfig
from bench.driver.harness import run_one
from bench.launch.netns import can_emulate, netns_list
from tests.conftest import our_processes, signal_and_wait, start_cli, wait_for_rank

OK, WHY = can_emulate()
pytestmark = pytest.mark.skipif(not OK, reason=f"no emulated cluster here: {WHY}")


def _our_namespaces(driver: int):
    """Namespaces and CPU groups of the run whose driver is process ``driver``; both must go with
    the run. Only that run's: other tests may run clusters beside this one (tests/conftest.py)."""
    from bench.launch.cgroups import groups_of
    from bench.launch.emulated_launcher import run_cluster_name

    name = run_cluster_name(driver)
    return [ns for ns in netns_list() if ns.startswith(f"{name}-")] + groups_of(name)


@pytest.fixture(scope="module")
def four_worker_rows():
    from bench.launch.emulated_launcher import EmulatedLauncher

    rows = {}
    with EmulatedLauncher(4, 1, 1e9) as launcher:
        for strategy in ("ps", "ralp", "ps-colocated", "single", "ralp-hybrid"):
            placement = "colocated" if strategy == "ps-colocated" else "dedicated"
            cfg = RunConfig(model="alexnet_cifar", strategy=strategy.replace("ps-colocated", "ps"), ps_placement=placement,
                            workers=4, batch_size=16, steps=3, warmup_steps=1, bandwidth="1gbit").validate()
            rows[strategy] = run_one(cfg, launcher)
    return rows


def test_colocated_ps_moves_ring_sized_traffic_on_every_worker_host(four_worker_rows):
    """One PS task beside each worker: host i serves its shard P_i to the 3 other workers and
    pulls the other shards, so summed over hosts 8(W-1)P bytes go out and as many come in,
    whatever the sharding: 16(W-1)P/W per host on average, the same as a ring all-reduce."""
    row = four_worker_rows["ps-colocated"]
    assert row["status"] == "ok", row["failure"]
    params, workers = 3_515_402, 4
    assert row["bytes_worker_measured"] == pytest.approx(16 * (workers - 1) * params / workers, rel=0.03)
    assert row["bytes_worker_measured"] == pytest.approx(row["bytes_worker_predicted"], rel=0.03)
    assert row["bytes_ps_measured"] is None and row["bytes_ps_predicted"] is None  # no PS host carries it
    assert row["ps_placement"] == "colocated"


def test_single_reference_trains_one_batch_alone(four_worker_rows):
    row = four_worker_rows["single"]
    assert row["status"] == "ok", row["failure"]
    assert row["images_per_sec"] == pytest.approx(16 / row["step_time_median_s"], rel=0.5)
    assert not row["bytes_worker_measured"]  # nothing crosses a link


def test_ralp_moves_at_most_a_fifth_of_ps_bytes_on_the_ps_link(four_worker_rows):
    ps, ralp = four_worker_rows["ps"], four_worker_rows["ralp"]
    assert ps["status"] == "ok", ps["failure"]
    assert ralp["status"] == "ok", ralp["failure"]
    assert ralp["bytes_ps_measured"] <= ps["bytes_ps_measured"] / 5
    # sync PS: the PS link carries 8·P·W bytes per step
    params = 3_515_402
    assert ps["bytes_ps_measured"] == pytest.approx(8 * params * 4, rel=0.10)


def test_hybrid_puts_only_activations_on_the_ps_link(four_worker_rows):
    """ralp-hybrid: 4 B A floats up and as many down per worker, W of them on the PS host; the
    tower's gradients go round the workers' ring (2(W-1)/W x 4 P_tower each way per worker)."""
    from bench.driver.planning import model_profile

    row = four_worker_rows["ralp-hybrid"]
    assert row["status"] == "ok", row["failure"]
    p_tower, _, floats, _, _ = model_profile("alexnet_cifar").split_sizes(row["cut_layer"])
    workers, batch = 4, 16
    assert row["bytes_ps_measured"] == pytest.approx(2 * 4 * workers * batch * floats, rel=0.10)
    ring = 2 * (workers - 1) / workers * 4 * p_tower
    assert row["bytes_worker_measured"] == pytest.approx(2 * (4 * batch * floats + ring), rel=0.10)
    assert row["bytes_ps_measured"] < four_worker_rows["ralp"]["bytes_ps_measured"] / 2


@pytest.mark.parametrize("strategy", ["ps", "ralp", "ralp-hybrid"])
def test_measured_bytes_within_ten_percent_of_the_cost_model(four_worker_rows, strategy):
    row = four_worker_rows[strategy]
    for role in ("ps", "worker"):
        measured, predicted = row[f"bytes_{role}_measured"], row[f"bytes_{role}_predicted"]
        assert measured == pytest.approx(predicted, rel=0.10), (role, measured, predicted)


def test_normal_run_leaves_nothing(four_worker_rows):
    assert _our_namespaces(os.getpid()) == []
    assert our_processes() == []


def _start_run(tmp_path, steps):
    return start_cli("run", "--cluster", "emulated", "--model", "lenet_mnist", "--strategy", "ps", "--workers", "2",
                     "--batch-size", "8", "--steps", steps, "--quiet", "--results", tmp_path / "results")


def test_failed_run_leaves_nothing(tmp_path):
    proc = _start_run(tmp_path, 100000)
    victim = wait_for_rank(3, proc)
    time.sleep(20)
    _, err = signal_and_wait(proc, victim[0], signal.SIGKILL)
    # "is gone": Open MPI lost its own notice of the death, which the chief's error names instead
    assert proc.returncode == 3 and re.search(r"rank 3 \(worker 1\) (died|is gone)", err), err
    assert _our_namespaces(proc.pid) == []
    assert our_processes() == []


def test_interrupted_run_leaves_nothing(tmp_path):
    proc = _start_run(tmp_path, 100000)
    wait_for_rank(2, proc)
    time.sleep(10)
    _, err = signal_and_wait(proc, proc.pid, signal.SIGINT, timeout=120)
    assert proc.returncode == 130, err
    assert "interrupted" in err
    assert _our_namespaces(proc.pid) == []
    assert our_processes() == []
    # an interrupted run writes no half result file
    assert not (tmp_path / "results" / "runs").exists() or not list((tmp_path / "results" / "runs").iterdir())
