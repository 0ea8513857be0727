"""One-line errors (issue 33): no traceback fragment reaches a user or a row's ``failure``;
the whole text goes to a log file, which the line names."""
import os
import re

from bench.core.errors import log_file, one_line, traceback_to_log
from tests.conftest import ralp_bench

TRACEBACK = '''calibration model failed: Traceback (most recent call last):
  File "/x/bench/driver/calibration.py", line 196, in _measure_model
    tower, head = split_model(model, cut)
                  ^^^^^^^^^^^^^^^^^^^^^^^
  File "/x/ralp/cut.py", line 20, in split_model
    raise UserError(msg)
bench.core.errors.UserError: cannot cut sequential after 'flatten_1'; valid cut points: flatten, dense'''


def test_a_traceback_becomes_the_exception_it_ends_in():
    line = one_line(TRACEBACK)
    assert line == ("calibration model failed: bench.core.errors.UserError: cannot cut sequential after 'flatten_1'; "
                    "valid cut points: flatten, dense")
    assert "\n" not in line and "^" not in line and "File " not in line


def test_plain_text_is_collapsed_and_capped():
    assert one_line("rank 3 died\n\n   (SIGKILL)  ") == "rank 3 died (SIGKILL)"
    long = one_line("x" * 5000, limit=100)
    assert len(long) == 100 and long.endswith("…")


def test_log_files_land_in_the_log_dir_and_keep_the_traceback(tmp_path, monkeypatch):
    monkeypatch.setenv("RALP_LOG_DIR", str(tmp_path))
    assert os.path.dirname(log_file("a b/c")) == str(tmp_path)
    try:
        raise ValueError("deep down")
    except ValueError as exc:
        path = traceback_to_log(exc, "unit")
    text = open(path).read()
    assert "Traceback (most recent call last)" in text and "ValueError: deep down" in text


def test_a_failed_launch_is_one_line_that_names_its_full_log(tmp_path, monkeypatch):
    """The chief raises in the strategy's setup: the CLI's error and the row's failure are one
    line each, with no traceback fragment, and name the log that holds the rank's traceback."""
    monkeypatch.setenv("RALP_LOG_DIR", str(tmp_path / "logs"))
    monkeypatch.setenv("RALP_STRATEGY_MODULES", "tests.demo_broken_spec")
    proc = ralp_bench("run", "--cluster", "local", "--model", "lenet_mnist", "--strategy", "broken", "--workers", "2",
                      "--batch-size", "4", "--steps", "1", "--warmup-steps", "0", "--quiet",
                      "--results", tmp_path / "results")
    assert proc.returncode == 3, proc.stderr[-2000:]
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("ralp-bench: error:")]
    assert len(errors) == 1, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "^^^" not in proc.stderr, proc.stderr[-2000:]
    assert "this strategy always fails in setup" in errors[0]
    m = re.search(r"full output: (\S+)", errors[0])
    assert m and os.path.isfile(m.group(1)), errors[0]
    log = open(m.group(1)).read()
    assert "Traceback (most recent call last)" in log and "RuntimeError: this strategy always fails" in log
    from bench.store.results import ResultStore

    failure = ResultStore(str(tmp_path / "results")).load()["failure"].iloc[0]
    assert "\n" not in failure and m.group(1) in failure


def test_a_bad_plugin_is_one_line_before_anything_starts(monkeypatch):
    monkeypatch.setenv("RALP_STRATEGY_MODULES", "tests.no_such_module")
    proc = ralp_bench("models")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.stderr.startswith("ralp-bench: error: RALP_STRATEGY_MODULES names 'tests.no_such_module'")
