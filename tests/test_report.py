"""Report tables, plots, HTML and compare, on two small hand-written runs.

The numbers below are made up to exercise the report code (round values whose speedups and
ratios are easy to check by hand); they are not measurements.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.image import imread

from bench.report import document as report
from bench.store.results import ResultStore, new_row

REPO = Path(__file__).resolve().parent.parent
RUN_A, RUN_B = "20261202T100000Z-aaaaaa", "20261202T110000Z-bbbbbb"
# model, workers, strategy, images/sec in A, in B (None: row absent; "fail": failed row)
TABLE = [
    ("alexnet", 2, "ps", 100, 100),
    ("alexnet", 2, "horovod", 150, 150),
    ("alexnet", 2, "ralp", 600, 1200),   # 2x faster in B
    ("alexnet", 2, "auto", 590, 590),
    ("alexnet", 4, "ps", 180, 189),      # +5%: unchanged at a 10% threshold
    ("alexnet", 4, "horovod", 300, 150),  # half: slower
    ("alexnet", 4, "ralp", 1100, 1100),
    ("vgg16", 2, "ps", "fail", "fail"),
    ("vgg16", 2, "horovod", 40, 40),
    ("vgg16", 2, "ralp", 160, 160),
    ("resnet50", 2, "ps", 50, None),     # only in A
    ("vgg16", 4, "ralp", None, 300),     # only in B
]
# worker bytes per step (measured, predicted): +20% and +5% errors
BYTES = {("alexnet", 2, "ralp"): (1.2e8, 1.0e8), ("alexnet", 4, "ralp"): (1.05e8, 1.0e8),
         ("alexnet", 2, "ps"): (4.888e8, 4.888e8)}


def _rows(which, with_accuracy=False):
    rows = []
    for model, workers, strategy, rate_a, rate_b in TABLE:
        rate = rate_a if which == "A" else rate_b
        if rate is None:
            continue
        fields = dict(run_id=None, started_at="2026-12-02T10:00:00Z" if which == "A"
                      else "2026-12-02T11:00:00Z", model=model, workers=workers, batch_size=32,
                      strategy=strategy, cluster_mode="emulated", link_bps=1e9, status="ok",
                      git_commit="a" * 40 if which == "A" else "b" * 40)
        if rate == "fail":
            fields.update(status="failed", failure="rank 1 died: out of memory | see log")
        else:
            fields["images_per_sec"] = float(rate)
        if strategy == "auto":
            fields["plan"] = "ralp"
        measured, predicted = BYTES.get((model, workers, strategy), (None, None))
        fields.update(bytes_worker_measured=measured, bytes_worker_predicted=predicted)
        if measured:
            fields.update(step_time_median_s=1.0, predicted_step_time_s=0.8)
        if with_accuracy and model == "alexnet":
            fields.update(accuracy=0.91, target_accuracy=0.9, time_to_accuracy_s=120.0,
                          steps_to_accuracy=1500)
        rows.append(new_row(**fields))
    return rows


@pytest.fixture
def store(tmp_path):
    store = ResultStore(tmp_path / "results")
    store.write_run(_rows("A"), RUN_A)
    store.write_run(_rows("B", with_accuracy=True), RUN_B)
    return store


def _table(markdown, title):
    """Rows of the Markdown table under '## title', as lists of cells."""
    lines = markdown.split(f"## {title}\n", 1)[1].strip().splitlines()
    body = []
    for line in lines[2:]:
        if not line.startswith("|"):
            break
        body.append([c.strip() for c in line.strip("|").split(" | ")])
    return body


def _row(table, *first_cells):
    (match,) = [r for r in table if r[: len(first_cells)] == [str(c) for c in first_cells]]
    return match


def test_report_tables_speedups_flags_and_failures(store, tmp_path):
    df = store.load([RUN_B], quiet=True)
    text = report.write_report(df, tmp_path / "out")
    throughput = _table(text, "Throughput and speedup")
    header = text.split("## Throughput and speedup\n\n", 1)[1].splitlines()[0]
    assert header == "| model | workers | ps | horovod | ralp | auto |"
    # 1200 / 100 = 12, 1200 / 150 = 8; 100 / 150 = 0.67
    assert _row(throughput, "alexnet", 2) == [
        "alexnet", "2", "100.0 (0.67× horovod)", "150.0 (1.50× ps)",
        "1,200 (12.00× ps, 8.00× horovod)", "590.0 [ran ralp] (5.90× ps, 3.93× horovod)"]
    vgg = _row(throughput, "vgg16", 2)
    assert vgg[2] == "failed: rank 1 died: out of memory \\| see log"
    assert vgg[4] == "160.0 (4.00× horovod)"  # no ps baseline: it failed
    assert _row(throughput, "vgg16", 4)[2:] == ["—", "—", "300.0", "—"]

    predictions = _table(text, "Measured against predicted")
    # columns: model, workers, strategy, bytes measured/predicted/error, step time m/p/error
    assert _row(predictions, "alexnet", 2, "ralp")[3:] == [
        "120.0 MB", "100.0 MB", "+20% ⚠", "1 s", "0.8 s", "+25% ⚠"]
    assert _row(predictions, "alexnet", 4, "ralp")[5] == "+5%"
    assert _row(predictions, "alexnet", 2, "ps")[3:6] == ["488.8 MB", "488.8 MB", "+0%"]

    accuracy = _table(text, "Accuracy")
    assert _row(accuracy, "alexnet", 2)[4] == "acc 0.910 · 120 s to 0.9, 1,500 steps"
    assert _row(_table(text, "Failures"), "vgg16", 2)[3] == "rank 1 died: out of memory \\| see log"
    assert "## Accuracy" not in report.write_report(store.load([RUN_A], quiet=True), tmp_path / "a")


def test_report_writes_markdown_html_and_readable_pngs(store, tmp_path):
    out = tmp_path / "out"
    text = report.write_report(store.load(quiet=True), out)
    assert (out / "report.md").read_text(encoding="utf-8") == text
    page = (out / "index.html").read_text(encoding="utf-8")
    for name in report.PLOT_FILES:
        png = out / name
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
        height, width = imread(png).shape[:2]
        assert width >= 600 and height >= 300, name
        assert f'src="{name}"' in page and f"({name})" in text
    assert '<td class="warn">+20% ⚠</td>' in page
    assert "rank 1 died: out of memory | see log" in page  # HTML needs no pipe escaping
    assert text.count(RUN_A) >= 2 and text.count(RUN_B) >= 2  # both runs: run_id is a key
    # a figure with nothing to draw is not left behind from an earlier report
    no_bytes = store.load([RUN_A], quiet=True).assign(
        bytes_worker_measured=None, bytes_worker_predicted=None,
        step_time_median_s=None, predicted_step_time_s=None)
    report.write_report(no_bytes, out)
    assert not (out / "bytes_per_step.png").exists()
    assert not (out / "predicted_vs_measured.png").exists()
    assert (out / "throughput.png").exists()


def test_varying_configuration_becomes_a_column(tmp_path):
    rows = [new_row(model="alexnet", workers=2, strategy=s, compression=c, images_per_sec=r,
                    batch_size=128 if s == "ps" else 64, run_id="r1", status="ok")
            for s, c, r in [("ps", "none", 100), ("ps", "fp16", 160), ("ralp", "none", 400)]]
    df = pd.DataFrame(rows)
    assert report.config_keys(df) == ["compression"]  # batch size only follows the strategy
    text = report.write_report(df, tmp_path)
    table = _table(text, "Throughput and speedup")
    assert _row(table, "alexnet", 2, "fp16")[3:] == ["160.0", "—"]
    assert _row(table, "alexnet", 2, "none")[3:] == ["100.0", "400.0 (4.00× ps)"]


def test_rows_that_differ_in_ring_buckets_or_threads_are_not_repeats(tmp_path):
    """Run 20261207T104334Z-29078b's report put the fused hybrid (--hybrid-bucket-mb 0) and the
    bucketed one (4) in one cell as if they were repeats of one configuration, and run
    20261207T204205Z-5d7cbd's its 2 and 4 inter-op thread rows: each is a column and a cell of its own."""
    rows = [new_row(model="vgg16", workers=8, strategy=s, hybrid_bucket_mb=b, inter_threads=t, images_per_sec=r,
                    run_id="r1", status="ok")
            for s, b, t, r in [("horovod", 4.0, None, 0.1), ("ralp-hybrid", 0.0, None, 0.6),
                               ("ralp-hybrid", 4.0, None, 0.7), ("ralp-hybrid", 4.0, 4, 0.8)]]
    df = pd.DataFrame(rows)
    assert report.config_keys(df) == ["hybrid_bucket_mb", "inter_threads"]
    table = _table(report.write_report(df, tmp_path), "Throughput and speedup")
    assert [cell[2:] for cell in table] == [["0", "—", "0.1", "0.6 (6.00× horovod)"],
                                               ["4", "—", "0.1", "0.7 (7.00× horovod)"],
                                               ["4", "4", "—", "0.8"]]


def test_plot_series_follow_the_link_setting_not_its_rate():
    """A scaled link's rate changes with the worker count (48 Mbit/s at 2, 24 at 4): its points
    form one series named by the preset; a plain link is named by its rate, in table units."""
    from bench.report import plots

    keys = ["link_bps", "ps_link_bps", "scaled_to"]
    scaled2 = dict(strategy="ralp", link_bps=48.2e6, ps_link_bps=48.2e6, scaled_to="v100-10gbe")
    scaled4 = dict(scaled2, link_bps=24.1e6, ps_link_bps=24.1e6)
    plain = dict(strategy="ralp", link_bps=1e9, ps_link_bps=1e9, scaled_to=None)
    assert plots._series_label(scaled2, keys) == plots._series_label(scaled4, keys) == \
        "ralp (scaled to v100-10gbe)"
    assert plots._series_label(plain, keys) == "ralp (1 Gbit/s)"
    assert plots._series_label(dict(plain, ps_link_bps=1e10), keys) == "ralp (1 Gbit/s, PS 10 Gbit/s)"
    assert report.fmt_key("link_bps", 48234411.8) == "48.2 Mbit/s"


def test_compare_marks_faster_slower_unchanged_and_one_sided_rows(store):
    a, b = store.load([RUN_A], quiet=True), store.load([RUN_B], quiet=True)
    result, counts = report.compare(a, b, threshold=0.10)
    text = report.to_markdown(result)
    table = _table(text, "images/sec: A → B")
    assert _row(table, "alexnet", 2, "ralp")[3:] == ["600.0", "1,200", "2.00", "faster"]
    assert _row(table, "alexnet", 4, "horovod")[3:] == ["300.0", "150.0", "0.50", "slower"]
    assert _row(table, "alexnet", 4, "ps")[3:] == ["180.0", "189.0", "1.05", "unchanged"]
    assert _row(table, "vgg16", 2, "ps")[6] == "failed in both"
    assert _row(_table(text, "Only in A"), "resnet50", 2, "ps")
    assert _row(_table(text, "Only in B"), "vgg16", 4, "ralp")
    assert counts == {"faster": 1, "slower": 1, "unchanged": 7, "failed": 1}
    assert "git_commit: " + "a" * 40 + " → " + "b" * 40 in text
    tight, _ = report.compare(a, b, threshold=0.01)
    assert _row(_table(report.to_markdown(tight), "images/sec: A → B"), "alexnet", 4, "ps")[6] == "faster"


def _cli(*args):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    return subprocess.run([sys.executable, "-m", "bench.cli", "report", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)


def test_cli_on_empty_store_exits_2_with_one_line(tmp_path):
    for results in (tmp_path / "missing", tmp_path):
        proc = _cli("--results", str(results))
        assert proc.returncode == 2, proc.stderr
        assert proc.stdout == ""
        assert len(proc.stderr.strip().splitlines()) == 1
        assert "no results yet" in proc.stderr and "ralp-bench run" in proc.stderr


def test_cli_report_and_compare(store, tmp_path):
    root = str(store.root)
    proc = _cli("--results", root)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("# ralp-bench report") and RUN_B in proc.stdout
    assert RUN_A not in proc.stdout  # default: the latest run only
    assert (store.root / "report" / "index.html").exists()

    out = tmp_path / "cmp"
    proc = _cli("--results", root, "--compare", RUN_A[:12], "latest", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "| alexnet | 2 | ralp | 600.0 | 1,200 | 2.00 | faster |" in proc.stdout
    assert (out / "compare.md").read_text(encoding="utf-8").strip() == proc.stdout.strip()

    proc = _cli("--results", root, "--run", "nope")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "no run 'nope'" in proc.stderr


def test_cli_reads_an_old_schema_file(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "proto.csv").write_text("model,strategy,workers,img_per_sec\nalexnet,ps,2,250\n"
                                    "alexnet,ralp,2,1000\n")
    proc = _cli("--results", str(tmp_path), "--all")
    assert proc.returncode == 0, proc.stderr
    assert "| alexnet | 2 | 250.0 | 1,000 (4.00× ps) |" in proc.stdout
    assert "older schema" in proc.stdout


def test_auto_table_judges_the_plan_against_the_measured_best():
    # alexnet x2 in run A: ralp 600 is best, auto ran ralp -> "best"
    rows = _rows("A")
    # vgg16 x2: auto ran horovod (40) while ralp measured 160 -> 75% slower
    rows.append(new_row(model="vgg16", workers=2, batch_size=32, strategy="auto", plan="horovod",
                        cluster_mode="emulated", link_bps=1e9, status="ok", images_per_sec=41.0,
                        started_at="2026-12-02T10:00:00Z"))
    # vgg19 x2: auto ran a plan no other column measured (the hybrid), faster than all of them
    for strategy, plan, rate in (("ralp", "ralp", 100.0), ("auto", "ralp-hybrid", 130.0)):
        rows.append(new_row(model="vgg19", workers=2, batch_size=32, strategy=strategy, plan=plan,
                            cluster_mode="emulated", link_bps=1e9, status="ok", images_per_sec=rate,
                            started_at="2026-12-02T10:00:00Z"))
    markdown = report.to_markdown(report.build_report(pd.DataFrame(rows))[0])
    table = _table(markdown, "Does auto pick the measured best?")
    assert ["alexnet", "2", "ralp", "ralp", "best"] in table
    assert ["vgg16", "2", "horovod", "ralp", "75% slower ⚠"] in table
    assert ["vgg19", "2", "ralp-hybrid", "ralp", "faster than every other"] in table
    assert "in 2 of 3 cells" in markdown


def test_auto_is_judged_by_the_rates_the_throughput_table_shows():
    """horovod's mean-based images/sec (tf_cnn_benchmarks': one slow step drags it) is above
    ralp's, its median step is slower: the table shows ralp faster, so auto's ralp is the best."""
    steps = {"horovod": [0.5] * 9 + [0.1], "ralp": [0.4] * 9 + [3.0]}
    steps["auto"] = steps["ralp"]
    rows = [new_row(model="alexnet", workers=2, batch_size=32, strategy=s, plan=plan, cluster_mode="emulated",
                    link_bps=1e9, status="ok", images_per_sec=64 * len(steps[s]) / sum(steps[s]),
                    step_times_s=json.dumps(steps[s]), started_at="2026-12-02T10:00:00Z")
            for s, plan in (("horovod", "horovod"), ("ralp", "ralp"), ("auto", "ralp"))]
    assert rows[0]["images_per_sec"] > rows[1]["images_per_sec"]
    markdown = report.to_markdown(report.build_report(pd.DataFrame(rows))[0])
    assert ["alexnet", "2", "ralp", "ralp", "best"] in _table(markdown, "Does auto pick the measured best?")
    throughput = _table(markdown, "Throughput and speedup")
    assert throughput[0][2].startswith("128.0 [") and throughput[0][3].startswith("160.0 [")  # 64 / 0.5, 64 / 0.4


def test_auto_slower_only_inside_the_noise_is_not_flagged():
    """8% slower by median, but the steps spread so far that the speedup's interval holds 1.0 (the
    throughput table's '≈'): no ⚠; the same 8% on steady steps is flagged."""
    spread, tight = np.linspace(0.6, 1.4, 13), np.linspace(0.998, 1.002, 13)  # medians 1.0
    noisy = {"horovod": 0.5 * spread, "ralp": 0.54 * spread[::-1]}
    steady = {"horovod": 0.5 * tight, "ralp": 0.54 * tight[::-1]}
    for steps, verdict in ((noisy, "≈ horovod ("), (steady, "slower ⚠")):
        steps["auto"] = steps["ralp"]
        rows = [new_row(model="alexnet", workers=2, batch_size=32, strategy=s, plan=plan, cluster_mode="emulated",
                        link_bps=1e9, status="ok", images_per_sec=64 * len(steps[s]) / sum(steps[s]),
                        step_times_s=json.dumps(list(map(float, steps[s]))), started_at="2026-12-02T10:00:00Z")
                for s, plan in (("horovod", "horovod"), ("ralp", "ralp"), ("auto", "ralp"))]
        markdown = report.to_markdown(report.build_report(pd.DataFrame(rows))[0])
        (row,) = _table(markdown, "Does auto pick the measured best?")
        assert row[:4] == ["alexnet", "2", "ralp", "horovod"] and verdict in row[4], row
        assert ("in 1 of 1 cells" if verdict.startswith("≈") else "in 0 of 1 cells") in markdown


def test_slow_links_and_tcp_retransmissions_are_flagged():
    rows = [new_row(model="alexnet", workers=2, batch_size=32, strategy=s, cluster_mode="emulated", link_bps=1e9,
                    status="ok", images_per_sec=100.0, link_pattern=p, link_efficiency=e, tcp_retransmit_max=r,
                    tcp_timeouts=t, started_at="2026-12-02T10:00:00Z")
            for s, p, e, r, t in (("ps", "fan-in", 0.99, 0.001, 0), ("horovod", "all-reduce", 0.6, 0.002, 0),
                                  ("ralp", "fan-in", 0.97, 0.043, 3))]
    markdown = report.to_markdown(report.build_report(pd.DataFrame(rows))[0])
    table = _table(markdown, "Transport health")
    assert table == [["alexnet", "2", "horovod", "all-reduce", "60% ⚠", "0.2%", "0", "—"],
                     ["alexnet", "2", "ralp", "fan-in", "97%", "4.3% ⚠", "3", "—"]]


def test_throughput_cells_carry_intervals_and_say_when_a_speedup_is_not_significant():
    import json

    rng = np.random.default_rng(0)
    times = {"ps": rng.normal(1.0, 0.02, 12), "horovod": rng.normal(0.99, 0.05, 12), "ralp": rng.normal(0.5, 0.01, 12)}
    rows = [new_row(model="alexnet", workers=2, batch_size=32, strategy=s, cluster_mode="emulated", link_bps=1e9,
                    status="ok", images_per_sec=64 * len(t) / t.sum(), step_times_s=json.dumps(t.tolist()),
                    started_at="2026-12-02T10:00:00Z") for s, t in times.items()]
    markdown = report.to_markdown(report.build_report(pd.DataFrame(rows))[0])
    cells = dict(zip(["ps", "horovod", "ralp"], _table(markdown, "Throughput and speedup")[0][2:]))
    assert "≈ ps" in cells["horovod"]                      # 1% apart with 5% noise: no significant difference
    assert "2.0" in cells["ralp"].split("(")[1] and "× ps" in cells["ralp"]
    low, high = (float(v) for v in cells["ralp"].split("[")[1].split("]")[0].split("–"))
    assert low < 64 / 0.5 < high                           # the interval holds the true rate
    assert all("]† ±" in cell for cell in cells.values())  # one launch each: marked, and the note says why
    assert "† One launch (repeat) only" in markdown


def _launch_rows(repeats, levels, seed=3):
    """``repeats`` launches of ps and horovod (15 steps each, alternating as a sweep interleaves
    them): each launch's level drawn with sd 5% around the strategy's ``levels``, steps 1% around it."""
    import json

    rng = np.random.default_rng(seed)
    rows = []
    for repeat in range(repeats):
        for strategy, level in levels.items():
            t = rng.normal(level * rng.normal(1.0, 0.05), 0.01, 15)
            rows.append(new_row(model="alexnet", workers=2, batch_size=32, strategy=strategy, cluster_mode="emulated",
                                link_bps=1e9, status="ok", images_per_sec=64 * len(t) / t.sum(), repeat=repeat,
                                step_times_s=json.dumps(t.tolist()), started_at="2026-12-02T10:00:00Z"))
    return rows


def test_repeats_are_launches_and_their_intervals_hold_the_spread_between_them(tmp_path):
    from bench.report.summary import summarize
    from bench.core.stats import launch_interval, pooled_interval

    store = ResultStore(tmp_path / "results")
    store.write_run(_launch_rows(3, {"ps": 1.0, "horovod": 0.97}), RUN_A)  # rows as stored runs keep them
    df = store.load([RUN_A], quiet=True)
    summary = summarize(df, [])
    steps = summary.set_index("strategy").loc["ps", "step_times"]
    assert [len(launch) for launch in steps] == [15, 15, 15]
    assert steps[1] == json_steps(df, "ps", 1)  # launch order and values as stored
    built = report.build_report(df)[0]
    markdown, page = report.to_markdown(built), report.to_html(built)
    cells = dict(zip(["ps", "horovod"], _table(markdown, "Throughput and speedup")[0][2:]))
    assert "†" not in markdown and "One launch" not in page
    assert "≈ ps" in cells["horovod"]  # 3% apart, launches 5% apart: not a significant difference
    ips = summary.set_index("strategy").loc["ps", "images_per_step"]
    rates = [ips / np.asarray(launch) for launch in steps]
    low, high = (float(v.replace(",", "")) for v in cells["ps"].split("[")[1].split("]")[0].split("–"))
    _, new_low, new_high = launch_interval(rates)
    old_low, old_high = pooled_interval(rates)
    assert (low, high) == pytest.approx((new_low, new_high), abs=0.06)  # the cell prints the interval over launches
    assert high - low > 2 * (old_high - old_low)                           # wider than steps-as-independent


def json_steps(df, strategy, repeat):
    import json

    (text,) = df[(df["strategy"] == strategy) & (df["repeat"] == repeat)]["step_times_s"]
    return json.loads(text)


def test_one_launch_intervals_are_marked_in_markdown_and_html():
    built = report.build_report(pd.DataFrame(_launch_rows(1, {"ps": 1.0, "horovod": 0.5})))[0]
    markdown, page = report.to_markdown(built), report.to_html(built)
    cells = _table(markdown, "Throughput and speedup")[0][2:]
    assert all("]† ±" in cell for cell in cells) and "× ps" in cells[1]  # one launch each: a verdict, marked
    assert "† One launch (repeat) only" in markdown and "† One launch (repeat) only" in page
    assert "]† ±" in page


def test_speedups_are_over_the_best_measured_ps_layout_and_scaling_over_one_process():
    rates = {("ps", "dedicated"): 50.0, ("ps", "colocated"): 80.0, ("horovod", "dedicated"): 100.0,
             ("ralp", "dedicated"): 160.0, ("single", "dedicated"): 40.0}
    rows = [new_row(model="alexnet", workers=4, batch_size=32, strategy=s, ps_placement=p, cluster_mode="emulated",
                    link_bps=1e9, status="ok", images_per_sec=r, started_at="2026-12-02T10:00:00Z")
            for (s, p), r in rates.items()]
    markdown = report.to_markdown(report.build_report(pd.DataFrame(rows))[0])
    header = next(line for line in markdown.splitlines() if line.startswith("| model | workers | single"))
    assert header.split(" | ")[2:6] == ["single", "ps", "ps-colocated", "horovod"]
    cells = _table(markdown, "Throughput and speedup")[0]
    assert "2.00× ps-colocated" in cells[6] and "1.60× horovod" in cells[6]   # ralp over the faster PS layout
    assert "× ps)" not in cells[6] and "×" not in cells[2]                     # never over the slower one; single has none
    # images/sec(4) / (4 x 40): 31%, 50%, 62%, 100%
    assert _table(markdown, "Scaling efficiency") == [["alexnet", "4", "40.0", "31%", "50%", "62%", "100%"]]


def test_interval_comparison_prints_the_pooled_interval_beside_the_one_over_launches(tmp_path):
    from bench.core.errors import UserError
    from bench.report.summary import interval_comparison

    store = ResultStore(tmp_path / "results")
    store.write_run(_launch_rows(3, {"ps": 1.0, "horovod": 0.97}), RUN_A)
    text = interval_comparison(RUN_A, "alexnet", 2, "ps", results=tmp_path / "results")
    head, medians, before, now = text.splitlines()
    assert head == f"{RUN_A}: alexnet, 2 workers, ps: 3 launches of 15, 15, 15 timed steps"
    assert before.startswith("  before: median of pooled steps, steps resampled as independent: ")
    assert now.startswith("  now: mean of launch medians, interval over launches: ") and "2 df" in now

    def width(line):
        low, high = line.split("[")[1].split("]")[0].split("–")
        return float(high) - float(low)
    assert width(now) > 2 * width(before)
    with pytest.raises(UserError, match="has 0 ok cells with step times for alexnet, 2 workers, ralp"):
        interval_comparison(RUN_A, "alexnet", 2, "ralp", results=tmp_path / "results")
