"""The link check: each pattern measured once per cluster, the all-reduce inside a Horovod run.

The decisions (which run can carry the all-reduce, when a stolen measurement is taken again
apart) on a described cluster; then a real Horovod run on the emulated cluster whose row's
all-reduce efficiency comes from its own ranks, with the separate probe's launch forbidden.
"""
from dataclasses import dataclass

import pytest

from bench.core.config import RunConfig
from bench.core.errors import UserError
from bench.launch import link_probe
from bench.launch.link_probe import GOODPUT, LinkChecks, PatternResult
from bench.launch.netns import can_emulate


@dataclass
class Host:
    bandwidth_bps: float


class Described:
    """A cluster as the link check reads it: host 0 the PS host, 1 Gbit/s NICs."""

    def __init__(self, hosts: int):
        self.hosts = [Host(1e9) for _ in range(hosts)]


def test_only_a_run_on_the_probes_own_hosts_one_rank_each_carries_the_all_reduce():
    checks = LinkChecks(lambda: Described(3))
    # the ring's line time for the buffer is about 1 s: 2(N-1)/N * 4 B * floats = rate * GOODPUT
    floats = checks.in_run_floats("all-reduce", [0, 1, 1])
    assert floats == pytest.approx(1e9 / 8 * GOODPUT / 4, rel=1e-6)
    assert checks.in_run_floats("fan-in", [0, 1, 1]) is None        # raw TCP patterns: measured apart
    assert checks.in_run_floats("all-reduce", [0, 2, 2]) is None    # two ranks per host: not the probe's ring
    assert checks.in_run_floats("all-reduce", [0, 1, 0]) is None    # one host: no ring
    assert checks.in_run_floats("all-reduce", [1, 1, 0]) is None    # not the worker hosts the probe uses
    assert LinkChecks(lambda: Described(2)).in_run_floats("all-reduce", [0, 1]) is None
    fast = Described(3)
    fast.hosts = [Host(100e9) for _ in range(3)]  # a second's worth would be 12 GB on every rank
    assert LinkChecks(lambda: fast).in_run_floats("all-reduce", [0, 1, 1]) == link_probe.ALLREDUCE_MAX_BYTES // 4


def test_the_runs_measurement_is_read_once_and_a_stolen_one_is_measured_again_apart(monkeypatch):
    apart = []
    monkeypatch.setattr(link_probe, "measure_pattern",
                        lambda cluster, pattern: apart.append(pattern) or PatternResult(pattern, 2, 1e9, 1.0, 0.8))
    checks = LinkChecks(lambda: Described(3))
    floats = checks.in_run_floats("all-reduce", [0, 1, 1])
    line = 2 * (2 - 1) / 2 * 4 * floats * 8 / (1e9 * GOODPUT)
    fields = checks.fields("all-reduce", in_run={"floats": floats, "seconds": line / 0.9, "steal": 0.01})
    assert fields == {"link_pattern": "all-reduce", "link_efficiency": pytest.approx(0.9)} and apart == []
    assert checks.in_run_floats("all-reduce", [0, 1, 1]) is None  # measured: later runs carry nothing
    assert checks.fields("all-reduce")["link_efficiency"] == pytest.approx(0.9) and apart == []

    stolen = LinkChecks(lambda: Described(3))
    fields = stolen.fields("all-reduce", in_run={"floats": floats, "seconds": line, "steal": 0.3})
    assert fields["link_efficiency"] == 0.8 and apart == ["all-reduce"]  # the hypervisor took 30%: again, apart
    assert LinkChecks(lambda: Described(3)).fields(None) == {}


def test_a_bad_probe_size_is_refused_before_anything_starts():
    with pytest.raises(UserError, match="--link-probe-floats must be at least 1"):
        RunConfig(strategy="horovod", link_probe_floats=0).validate()


OK, WHY = can_emulate()


@pytest.mark.skipif(not OK, reason=f"no emulated cluster here: {WHY}")
def test_a_horovod_run_makes_the_all_reduce_check_in_its_own_ranks(monkeypatch):
    """No mpirun of the separate probe: its launch fails the test if it is reached. The row's
    efficiency is the run's own all-reduce against line rate, within what the shaper allows."""
    from bench.core.roles import RankLayout
    from bench.driver.harness import run_one
    from bench.launch.emulated_launcher import EmulatedLauncher

    def launched_apart(*args, **kwargs):
        raise AssertionError("the all-reduce was probed by a launch of its own")

    monkeypatch.setattr(link_probe, "_allreduce_pattern", launched_apart)
    cfg = RunConfig(model="lenet_mnist", strategy="horovod", workers=2, batch_size=8, steps=1, warmup_steps=1,
                    bandwidth="1gbit").validate()
    with EmulatedLauncher(2, 1, 1e9) as launcher:
        row = run_one(cfg, launcher)
        assert row["status"] == "ok", row["failure"]
        assert row["link_pattern"] == "all-reduce"
        assert 0.4 < row["link_efficiency"] < 1.1, row["link_efficiency"]  # the shaper's burst is the ceiling
        assert launcher.in_run_link_probe("all-reduce", RankLayout.for_run(cfg, "horovod")) is None
