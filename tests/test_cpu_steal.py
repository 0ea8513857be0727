"""CPU steal (bench/launch/cpu_steal.py): read from /proc/stat, and the rule that measures again under it."""
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
