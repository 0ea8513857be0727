"""CPU steal (bench/launch/cpu_steal.py): read from /proc/stat, and the rule that measures again under it."""
import subprocess
import sys

import pytest

from bench.core.errors import UserError
import bench.launch.cpu_steal as cs


def test_steal_is_read_from_this_machine():
    before = cs.cpu_times()
    sum(i * i for i in range(200_000))
    share = cs.steal_share(before, cs.cpu_times())
    assert share is None or 0.0 <= share <= 1.0   # None only when no jiffy passed
    assert cs.steal_share((5, 100), (15, 200)) == pytest.approx(0.10)
    assert cs.steal_share(None, (1, 2)) is None


def readings(*steals):
    """Fake /proc/stat readings, a (before, after) pair around each measurement, with these steals."""
    ticks, out = [0, 0], []
    for s in steals:
        out.append(tuple(ticks))
        ticks = [ticks[0] + int(100 * s), ticks[1] + 100]
        out.append(tuple(ticks))
    return iter(out)


def test_a_measurement_under_steal_is_taken_again_at_most_three_times(monkeypatch):
    # /proc/stat readings around each measurement: steal 50%, then 0% -> two measurements.
    calls, superseded = [], []
    ticks = readings(0.5, 0.0)
    monkeypatch.setattr(cs, "cpu_times", lambda: next(ticks))
    result, steal = cs.measure_quietly(lambda: calls.append(1) or len(calls), 0.10,
                                       lambda r, s, a: superseded.append((r, s, a)))
    assert (result, steal, superseded) == (2, 0.0, [(1, 0.5, 1)])
    ticks = readings(0.5, 0.5, 0.5)
    calls.clear()
    monkeypatch.setattr(cs, "cpu_times", lambda: next(ticks))
    assert cs.measure_quietly(lambda: calls.append(1) or len(calls), 0.10) == (cs.STEAL_TRIES, 0.5)
    ticks = readings(0.5)
    monkeypatch.setattr(cs, "cpu_times", lambda: next(ticks))
    assert cs.measure_quietly(lambda: "once", None) == ("once", 0.5)   # no limit: one measurement
    for bad in (0, 1, 1.5, -0.1, True, "0.1"):
        with pytest.raises(UserError, match="max_steal must be a share of the CPU between 0 and 1"):
            cs.check_max_steal(bad)


def test_calibration_is_measured_again_under_steal_and_cached_with_it(monkeypatch, tmp_path):
    import bench.driver.calibration as calibration

    monkeypatch.setattr(calibration, "CACHE", tmp_path / "calibration.json")
    ticks = readings(0.5, 0.02)
    monkeypatch.setattr(cs, "cpu_times", lambda: next(ticks))
    figures = iter([{"full_s": 2.0}, {"full_s": 1.0}])
    first = calibration._cached("key", lambda: next(figures))
    assert (first["full_s"], first["steal"]) == (1.0, 0.02)   # the stolen measurement is not kept
    assert calibration._cached("key", lambda: pytest.fail("measured again")) == first
    assert "under 2% CPU steal" in calibration._provenance(first)


# ---- other processes' load: what a calibration's quota cannot keep away -----------------------

def test_others_load_is_the_machines_busy_time_less_this_processes_own(monkeypatch):
    clock, busy, own = iter([10.0, 12.0]), iter([100.0, 103.0]), iter([5.0, 6.5])
    monkeypatch.setattr(cs.time, "monotonic", lambda: next(clock))
    monkeypatch.setattr(cs, "busy_seconds", lambda: next(busy))
    monkeypatch.setattr(cs, "own_seconds", lambda: next(own))
    with cs.OthersLoad() as load:
        pass
    assert load.cores == pytest.approx((3.0 - 1.5) / 2.0)
    assert cs.free_share(0.5, 2 / 3, machine_cores=2) == 1.0          # 1.5 cores left for a 0.67 quota
    assert cs.free_share(1.6, 2 / 3, machine_cores=2) == pytest.approx(0.6)
    assert cs.free_share(3.0, 1.0, machine_cores=2) == 0.0 and cs.free_share(None, 1.0) is None


def test_a_calibration_crowded_by_other_processes_is_measured_again_and_says_so(monkeypatch, tmp_path):
    import bench.driver.calibration as calibration

    monkeypatch.setattr(calibration, "CACHE", tmp_path / "calibration.json")
    monkeypatch.delenv("RALP_CALIBRATION_MIN_FREE", raising=False)
    figures = iter([{"full_s": 3.0, "free_share": 0.0}, {"full_s": 2.0, "free_share": 0.4},
                    {"full_s": 1.0, "free_share": 0.95}])
    first = calibration._cached("key", lambda: next(figures))
    assert (first["full_s"], first["free_share"]) == (1.0, 0.95)   # the crowded measurement is not kept
    assert "other processes leaving it 95% of its cores" in calibration._provenance(first)
    monkeypatch.setenv("RALP_CALIBRATION_MIN_FREE", "0")              # never again: the first one stands
    figures = iter([{"full_s": 2.0, "free_share": 0.4}])
    assert calibration._cached("other", lambda: next(figures))["full_s"] == 2.0
    for bad in ("1.5", "-0.1", "most"):
        monkeypatch.setenv("RALP_CALIBRATION_MIN_FREE", bad)
        with pytest.raises(UserError, match="RALP_CALIBRATION_MIN_FREE must be a share between 0 and 1"):
            calibration._cached("third", lambda: pytest.fail("measured despite a bad setting"))


def test_the_calibration_program_reports_the_load_beside_it():
    """The real program measuring the whole machine (no quota: ``analyze --hardware local``)
    beside two busy loops: it counts them, not itself, and says they left it under 90% of the
    machine. (Under a quota in a CPU group of its own, the scheduler shares the cores between
    groups first: five loops in one group took 1.49 cores and left a 0.5-core calibration all
    of its quota, which it reported as 1.0.)"""
    from bench.driver.calibration import run_capped

    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        figures = run_capped(None, ["hardware"])
    finally:
        for p in spinners:
            p.kill()
            p.wait()
    assert figures["others_cores"] >= 0.8, figures
    assert figures["free_share"] < 0.9, figures
