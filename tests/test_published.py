"""bench/report/published.py: the shipped published points carry their sources and settings, the error
arithmetic is what results/published.md says it is, and the comparison runs on the shipped data."""
import json

import pytest

from bench.core.errors import UserError
from bench.report import published


def test_every_shipped_point_has_a_source_and_its_settings():
    sources, points = published.load()
    assert len(sources) >= 3 and len(points) >= 20
    for source in sources.values():
        assert source["url"].startswith("https://"), source["id"]
        assert source["worker"] in ("gpu", "host")
        assert source["gpus_per_host"] in (4, 8)
    for point in points:
        source = sources[point["source"]]
        assert point["hosts"] * point["gpus_per_host"] == point["gpus"], point
        assert point["gpus_per_host"] <= source["gpus_per_host"]
        assert point["gpus"] > point["base_gpus"] or point["gpus"] == source["gpus_per_host"], point
        assert point["base_images_per_s"] > 0 and point["batch_per_gpu"] > 0
        published_eff = published.published_efficiency(point)
        assert 0 < published_eff <= 1.05, point  # nobody publishes a 2x superlinear cluster
    # every source's points came from a plot only where the source says it was read from one
    for point in points:
        assert not point["read_from_plot"] or sources[point["source"]].get("read_from_plot")


def test_error_arithmetic_on_a_fake_point():
    point = {"gpus": 16, "images_per_s": 1280.0, "base_gpus": 1, "base_images_per_s": 100.0}
    eff = published.published_efficiency(point)
    assert eff == pytest.approx(1280 / (16 * 100))  # 80%
    ips_err, eff_err = published.errors(1280.0, 1408.0, eff, 0.9)
    assert ips_err == pytest.approx(0.10)
    assert eff_err == pytest.approx(0.9 / 0.8 - 1)  # +12.5%
    # a stated efficiency wins; no images/sec published, no images/sec error
    assert published.published_efficiency({**point, "images_per_s": None, "efficiency": 0.68}) == 0.68
    assert published.errors(None, 5000.0, 0.68, 0.51) == (None, pytest.approx(0.51 / 0.68 - 1))
    # a base of one 8-GPU machine: efficiency per GPU against that machine's per-GPU rate
    assert published.published_efficiency({"gpus": 16, "images_per_s": 1578, "base_gpus": 8,
                                            "base_images_per_s": 1633}) == pytest.approx(1578 / 16 / (1633 / 8))


def _write(tmp_path, sources, points):
    path = tmp_path / "points.json"
    path.write_text(json.dumps({"sources": sources, "points": points}))
    return path


def test_points_without_a_source_or_settings_are_refused(tmp_path):
    sources, points = published.load()
    good_sources = list(sources.values())
    orphan = {**points[0], "source": "nowhere"}
    with pytest.raises(UserError, match="unknown source 'nowhere'"):
        published.load(_write(tmp_path, good_sources, [orphan]))
    bare = {k: v for k, v in points[0].items() if k != "batch_per_gpu"}
    with pytest.raises(UserError, match="lacks batch_per_gpu"):
        published.load(_write(tmp_path, good_sources, [bare]))
    unsourced = [{k: v for k, v in good_sources[0].items() if k != "network"}]
    with pytest.raises(UserError, match="lacks network"):
        published.load(_write(tmp_path, unsourced, []))


def test_one_machine_of_distributed_replicated_scales_perfectly_in_the_model():
    """A 'host' source's single machine is one worker with 8 x B images in one GPU's step and no
    network: the same step as its 1-GPU base, so its predicted efficiency is exactly 1."""
    from bench.driver.planning import model_profile

    sources, points = published.load()
    source = sources["tf-benchmarks-k80-ec2"]
    hardware, _ = published.source_hardware(source)
    point = next(p for p in points if p["source"] == source["id"] and p["gpus"] == 8)
    checked = published.check_point(point, source, hardware, model_profile(point["model"]))
    assert checked.predicted_eff == pytest.approx(1.0)
    assert checked.ips_error == pytest.approx(checked.predicted_ips / point["images_per_s"] - 1)


@pytest.mark.timeout(120)
def test_the_report_runs_on_the_shipped_data():
    """Every source gets its table and every point its line (profiles five ImageNet models, ~15 s)."""
    sources, checked, notes = published.check_all()
    text = published.render(sources, checked, notes)
    _, points = published.load()
    for source in sources.values():
        assert source["title"] in text and source["url"] in text
    table_rows = [line for line in text.splitlines() if line.startswith("| ") and "(`" in line]
    assert len(table_rows) == len(points)
    for rows in checked.values():
        for c in rows:
            assert c.predicted_ips > 0 and 0 < c.predicted_eff <= 1.0 + 1e-9
            if c.point.get("images_per_s"):
                assert c.ips_error == pytest.approx(c.predicted_ips / c.point["images_per_s"] - 1)
            # the fully overlapped step is never slower than the sequential one
            assert c.overlap_ips >= c.predicted_ips * (1 - 1e-9)
    assert "points within ±20% on scaling efficiency" in text
