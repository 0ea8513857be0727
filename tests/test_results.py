"""The result store keeps every run, never rewrites one, and survives bad files in its folder."""
import hashlib
import importlib.metadata
import json
import os
import platform
import re
import shutil
import subprocess
import sys

import pandas as pd
import pyarrow.parquet as pq
import pytest

from bench.core.errors import UserError
from bench.store.results import (SCHEMA_FIELDS, SCHEMA_VERSION, ResultStore, RunExistsError,
                                 _write_once, environment_fields, new_row, new_run_id)


def _rows(n=3, model="alexnet", started="2026-12-02T10:00:00Z"):
    return [new_row(started_at=started, model=model, strategy=s, workers=w, batch_size=32,
                    images_per_sec=100.0 * (i + 1), bytes_worker_measured=1.5e8, status="ok")
            for i, (s, w) in enumerate([("ps", 2), ("horovod", 2), ("ralp", 2)][:n])]


def _sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _all_files(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


# ---- rows -------------------------------------------------------------------------------------

def test_new_row_fills_every_field_and_checks_names_and_types():
    row = new_row(model="vgg16", workers="4", images_per_sec=12, git_dirty="false")
    assert list(row) == list(SCHEMA_FIELDS)
    assert row["workers"] == 4 and row["images_per_sec"] == 12.0 and row["git_dirty"] is False
    assert row["strategy"] is None and row["failure"] is None
    assert new_row(images_per_sec=float("nan"))["images_per_sec"] is None
    with pytest.raises(TypeError, match="modle"):
        new_row(modle="vgg16")
    with pytest.raises(ValueError, match="workers"):
        new_row(workers=2.5)


def test_run_ids_sort_by_time_and_do_not_collide():
    import datetime as dt
    early = new_run_id(dt.datetime(2026, 12, 2, 9, 0, 0, tzinfo=dt.timezone.utc))
    late = new_run_id(dt.datetime(2026, 12, 2, 16, 30, 0, tzinfo=dt.timezone.utc))
    assert re.fullmatch(r"20261202T090000Z-[0-9a-f]{6}", early)
    assert early < late
    # 24 random bits: 20 ids in one second collide with p ~ 1e-5 (200: p ~ 1e-3, and it failed once)
    assert len({new_run_id() for _ in range(20)}) == 20


def test_environment_fields_use_metadata_not_imports(tmp_path):
    code = ("import json, sys; from bench.store.results import environment_fields as e; "
            "f = e(); print(json.dumps(f)); print('tensorflow' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          cwd=os.path.dirname(os.path.dirname(__file__)))
    fields_json, tf_imported = proc.stdout.strip().splitlines()[-2:]
    fields = json.loads(fields_json)
    assert tf_imported == "False"
    assert fields["python_version"] == platform.python_version()
    assert fields["cpu_cores"] == os.cpu_count()
    try:
        expected_tf = importlib.metadata.version("tensorflow-cpu")
    except importlib.metadata.PackageNotFoundError:
        expected_tf = None
    if expected_tf:
        assert fields["tf_version"] == expected_tf
    if shutil.which("mpirun"):
        first = subprocess.run(["mpirun", "--version"], capture_output=True, text=True).stdout
        assert fields["mpi_version"].split()[-1] in first.splitlines()[0]
    if not shutil.which("nvidia-smi"):
        assert fields["gpus"] == 0


def test_environment_git_commit_and_dirty_ignore_the_result_store(tmp_path):
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@e"]
    subprocess.run(git + ["init", "-q"], check=True)
    (tmp_path / "code.py").write_text("a = 1\n")
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "manifest.json").write_text("{}\n")
    subprocess.run(git + ["add", "."], check=True)
    subprocess.run(git + ["commit", "-qm", "x"], check=True)
    head = subprocess.run(git + ["rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    clean = environment_fields(tmp_path)
    assert clean["git_commit"] == head and clean["git_dirty"] is False
    (tmp_path / "results" / "manifest.json").write_text('{"runs": []}\n')
    assert environment_fields(tmp_path)["git_dirty"] is False
    (tmp_path / "code.py").write_text("a = 2\n")
    assert environment_fields(tmp_path)["git_dirty"] is True


def test_rows_describe_the_whole_checkout_not_the_package_that_asks():
    """By default the commit and dirtiness are the checkout's (every file but the result store),
    wherever in the tree the store's module sits."""
    from bench.store.environment import CODE_ROOT
    from tests.conftest import ROOT

    assert CODE_ROOT == ROOT and (CODE_ROOT / "pyproject.toml").is_file()


# ---- writing ----------------------------------------------------------------------------------

def test_commit_writes_parquet_csv_and_consistent_manifest_without_temp_files(tmp_path):
    store = ResultStore(tmp_path)
    run_id = "20261202T100000Z-aaaaaa"
    store.append_rows(run_id, _rows(2))
    assert store.pending_run_ids() == [run_id]
    store.append_rows(run_id, _rows(3)[2:])
    store.commit_run(run_id)
    assert _all_files(tmp_path) == [".lock", "manifest.json", f"runs/{run_id}.csv",
                                    f"runs/{run_id}.parquet"]
    parquet = tmp_path / "runs" / f"{run_id}.parquet"
    table = pq.read_table(parquet).to_pandas()
    assert list(table["images_per_sec"]) == [100.0, 200.0, 300.0]
    assert set(table["run_id"]) == {run_id} and set(table["schema_version"]) == {SCHEMA_VERSION}
    mirror = pd.read_csv(tmp_path / "runs" / f"{run_id}.csv")
    assert list(mirror["strategy"]) == ["ps", "horovod", "ralp"]
    (entry,) = json.loads((tmp_path / "manifest.json").read_text())["runs"]
    assert entry["run_id"] == run_id and entry["rows"] == 3
    assert entry["sha256"] == _sha(parquet)
    assert entry["strategies"] == ["horovod", "ps", "ralp"] and entry["models"] == ["alexnet"]
    assert entry["schema_version"] == SCHEMA_VERSION
    assert entry["files"] == {"parquet": f"{run_id}.parquet", "csv": f"{run_id}.csv"}
    assert store.pending_run_ids() == []


def test_failed_write_leaves_neither_temp_nor_target(tmp_path):
    target = tmp_path / "run.parquet"

    def write_then_fail(handle):
        handle.write(b"half a file")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        _write_once(target, write_then_fail)
    assert list(tmp_path.iterdir()) == []


def test_run_files_are_never_overwritten(tmp_path):
    store = ResultStore(tmp_path)
    run_id = store.write_run(_rows(), "20261202T100000Z-bbbbbb")
    parquet = tmp_path / "runs" / f"{run_id}.parquet"
    before = _sha(parquet)
    with pytest.raises(RunExistsError):
        store.write_run(_rows(1, model="vgg16"), run_id)
    with pytest.raises(RunExistsError):
        store.append_rows(run_id, _rows(1))
    with pytest.raises(RunExistsError):
        _write_once(parquet, lambda handle: handle.write(b"other"))
    assert _sha(parquet) == before
    assert set(store.load(quiet=True)["model"]) == {"alexnet"}
    assert [p.name for p in tmp_path.rglob("*.tmp-*")] == []


def test_journal_survives_a_crash_and_commits_later(tmp_path):
    run_id = "20261202T100000Z-cccccc"
    ResultStore(tmp_path).append_rows(run_id, _rows(2))
    journal = tmp_path / "pending" / f"{run_id}.jsonl"
    with open(journal, "a") as handle:
        handle.write('{"model": "vgg16", "strategy": "ps", "images_per')  # cut off mid-line
    later = ResultStore(tmp_path)  # a new process picking the run up
    assert later.pending_run_ids() == [run_id]
    later.commit_run(run_id)
    assert any(f"{journal}:3" in w for w in later.warnings)
    assert list(later.load(quiet=True)["strategy"]) == ["ps", "horovod"]


# ---- reading ----------------------------------------------------------------------------------

def test_v0_csv_is_migrated(tmp_path):
    store = ResultStore(tmp_path)
    store.write_run(_rows(1, started="2026-12-02T12:00:00Z"), "20261202T120000Z-dddddd")
    (tmp_path / "runs" / "proto-2025.csv").write_text(
        "model,strategy,workers,batch_size,img_per_sec,step_time_s\n"
        "alexnet,ps,2,128,250.5,1.02\n"
        "alexnet,ralp,2,128,1800,0.142\n")
    df = store.load(quiet=True)
    assert store.warnings == []
    old = df[df["run_id"] == "proto-2025"].reset_index(drop=True)
    assert list(old["images_per_sec"]) == [250.5, 1800.0]
    assert list(old["step_time_median_s"]) == [1.02, 0.142]
    assert list(old["status"]) == ["ok", "ok"] and list(old["schema_version"]) == [0, 0]
    assert old["git_commit"].isna().all() and old["accuracy"].isna().all()
    assert str(old["workers"].dtype) == "Int64" and list(old["workers"]) == [2, 2]
    assert set(df.columns) >= set(SCHEMA_FIELDS)
    # no started_at: the old file sorts first, the dated run stays the latest
    assert store.run_ids() == ["proto-2025", "20261202T120000Z-dddddd"]


def test_broken_and_foreign_files_are_named_and_skipped(tmp_path, capsys):
    store = ResultStore(tmp_path)
    good = store.write_run(_rows(), "20261202T100000Z-eeeeee")
    mirrored = store.write_run(_rows(2, model="vgg16"), "20261202T110000Z-ffffff")
    runs = tmp_path / "runs"
    good_bytes = (runs / f"{good}.parquet").read_bytes()
    (runs / "truncated.parquet").write_bytes(good_bytes[: len(good_bytes) // 2])
    (runs / "random.parquet").write_bytes(os.urandom(4096))
    (runs / "foreign.csv").write_text("name,age\nada,36\n")
    (runs / "empty.csv").write_bytes(b"")
    (runs / "notes.txt").write_text("hello")
    mirror_bytes = (runs / f"{mirrored}.parquet").read_bytes()
    (runs / f"{mirrored}.parquet").write_bytes(mirror_bytes[:100])  # its CSV mirror is intact
    future = pd.DataFrame([dict(_rows(1)[0], schema_version=SCHEMA_VERSION + 1)])
    future.to_csv(runs / "from-the-future.csv", index=False)

    df = store.load()
    stderr = capsys.readouterr().err
    for name in ("truncated.parquet", "random.parquet", "foreign.csv", "empty.csv", "notes.txt",
                 f"{mirrored}.parquet", "from-the-future.csv"):
        assert any(name in w for w in store.warnings), name
        assert name in stderr
        assert any(name in w for w in df.attrs["warnings"])
    assert any("CSV mirror" in w and mirrored in w for w in store.warnings)
    assert any("newer" in w and "from-the-future" in w for w in store.warnings)
    assert sorted(df["run_id"].unique()) == [good, mirrored]
    assert list(df[df["run_id"] == good]["images_per_sec"]) == [100.0, 200.0, 300.0]
    assert list(df[df["run_id"] == mirrored]["model"]) == ["vgg16", "vgg16"]
    assert store.run_ids() == [good, mirrored]


def test_changed_file_and_corrupt_manifest_are_reported_and_repaired(tmp_path):
    store = ResultStore(tmp_path)
    first = store.write_run(_rows(), "20261202T100000Z-111111")
    other = ResultStore(tmp_path / "elsewhere")
    other_id = other.write_run(_rows(1), "20261202T100000Z-222222")
    shutil.copy(tmp_path / "elsewhere" / "runs" / f"{other_id}.parquet",
                tmp_path / "runs" / f"{first}.parquet")  # valid parquet, different bytes
    store.load(quiet=True)
    assert any("checksum" in w and first in w for w in store.warnings)

    (tmp_path / "manifest.json").write_text("{not json")
    assert len(store.load(quiet=True)) == 1
    assert any("manifest.json" in w for w in store.warnings)
    second = store.write_run(_rows(2), "20261202T110000Z-333333")
    runs = json.loads((tmp_path / "manifest.json").read_text())["runs"]
    assert [e["run_id"] for e in runs] == [first, second]


def test_latest_resolve_and_unknown_ids(tmp_path):
    store = ResultStore(tmp_path)
    assert store.latest_run_id() is None and store.load(quiet=True).empty
    a = store.write_run(_rows(started="2026-12-02T10:00:00Z"), "20261202T100000Z-a1a1a1")
    b = store.write_run(_rows(started="2026-12-02T11:00:00Z"), "20261202T110000Z-b2b2b2")
    assert store.run_ids() == [a, b] and store.latest_run_id() == b
    assert store.resolve_run_id("latest") == b and store.resolve_run_id("previous") == a
    assert store.resolve_run_id("20261202T10") == a
    with pytest.raises(UserError, match="ambiguous"):
        store.resolve_run_id("20261202T1")
    with pytest.raises(UserError, match="no run"):
        store.load(["nope"])
    assert list(store.load([a], quiet=True)["run_id"].unique()) == [a]
    with pytest.raises(UserError, match="bad run id"):
        store.append_rows("../escape", _rows(1))
