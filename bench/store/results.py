"""The versioned result store: one write-once file per run, an index, and a forgiving reader.

Why it looks like this: benchmark numbers are only worth keeping if they are never silently
lost or rewritten. So each run becomes ``results/runs/<run_id>.parquet`` (typed, for analysis)
plus a CSV mirror (for ``git diff``), written atomically and never overwritten;
``results/manifest.json`` indexes the runs with a checksum per file. Rows are journaled to
``results/pending/<run_id>.jsonl`` as they arrive, so a sweep that dies half-way keeps what it
measured and can still be committed. The journal is versioned like the runs (not git-ignored): a
sweep longer than one session or one machine resumes from the committed journal (`sweep --resume`);
an ignored journal was lost with the checkout it was written in, and with it hours of measurement. Reading never trusts the directory: a truncated,
foreign or empty file is named in a warning and skipped, and the other runs still load;
files from older schema versions are migrated on read.

Row fields are the flat schema in ``FIELD_TYPES`` (bench/store/schema.py); build rows with
``new_row``. The environment columns come from bench/store/environment.py.
"""
import contextlib
import hashlib
import json
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from bench.core.errors import UserError
from bench.store.atomic import fsync_dir, write_temp, write_text_atomic
from bench.store.dirlock import dir_lock
from bench.store.environment import environment_fields  # noqa: F401 (part of this module's API)
from bench.store.schema import (  # noqa: F401 (re-exported: the store's API)
    FIELD_TYPES, REQUIRED_COLUMNS, SCHEMA_FIELDS, SCHEMA_VERSION, V0_RENAMES, VERSION_COLUMN, _arrow_schema,
    _require_arrow, coerce_frame, is_missing, migrate, new_row, new_run_id, utc_now_iso)

_RUN_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


class RunExistsError(UserError):
    """A run id that is already stored: run files are write-once."""


# ---------------------------------------------------------------- store ----------------------

@dataclass
class ScanResult:
    """What a directory scan found: one frame per readable run, and a line per skipped file."""

    frames: dict = field(default_factory=dict)
    warnings: list = field(default_factory=list)


class ResultStore:
    """Write-once run files under ``root``, an index (manifest.json), and a forgiving reader."""

    def __init__(self, root="results"):
        self.root = Path(root)
        self.runs_dir = self.root / "runs"
        self.pending_dir = self.root / "pending"
        self.manifest_path = self.root / "manifest.json"
        self.warnings = []

    # ---- writing --------------------------------------------------------------------------
    def append_rows(self, run_id, rows):
        """Journal rows of an open run (fsync'd); they become a run file at ``commit_run``."""
        self._check_run_id(run_id)
        if self._run_file(run_id).exists():
            raise RunExistsError(f"run {run_id} is already stored in {self.runs_dir}; "
                                 "run files are write-once, start a new run id")
        lines = []
        for row in rows:
            full = new_row(**{k: v for k, v in row.items() if k != VERSION_COLUMN})
            full["run_id"] = run_id
            lines.append(json.dumps(full, allow_nan=False) + "\n")
        self.pending_dir.mkdir(parents=True, exist_ok=True)
        with open(self.pending_dir / f"{run_id}.jsonl", "a", encoding="utf-8") as journal:
            journal.writelines(lines)
            journal.flush()
            os.fsync(journal.fileno())
        return len(lines)

    def commit_run(self, run_id):
        """Write the journaled rows of ``run_id`` as its parquet + CSV files and index them."""
        _require_arrow()
        import pyarrow as pa  # lazy: pyarrow loads only where rows are stored or read
        import pyarrow.parquet as pq  # lazy: pyarrow loads only where rows are stored or read
        self._check_run_id(run_id)
        journal = self.pending_dir / f"{run_id}.jsonl"
        rows = self._read_journal(journal)
        if not rows:
            raise UserError(f"run {run_id} has no rows to commit (nothing in {journal})")
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        with self._lock():
            parquet_path = self._run_file(run_id)
            csv_path = parquet_path.with_suffix(".csv")
            if parquet_path.exists() or csv_path.exists():
                raise RunExistsError(f"run {run_id} is already stored in {self.runs_dir}; "
                                     "run files are write-once")
            for row in rows:
                row[VERSION_COLUMN] = SCHEMA_VERSION
            table = pa.Table.from_pylist(rows, schema=_arrow_schema())
            _write_once(parquet_path, lambda f: pq.write_table(table, f))
            frame = coerce_frame(pd.DataFrame(rows))
            _write_once(csv_path, lambda f: f.write(frame.to_csv(index=False).encode("utf-8")))
            manifest, problem = self._read_manifest()
            if problem:  # an unreadable index is rebuilt from the files, which are the truth
                self._warn(f"{self.manifest_path}: {problem}; rebuilt from run files")
                manifest = self._rebuild_manifest()
            entries = {e["run_id"]: e for e in manifest["runs"]}
            entries[run_id] = _manifest_entry(run_id, frame, parquet_path, csv_path)
            self._write_manifest(entries.values())
        journal.unlink()
        with contextlib.suppress(OSError):
            self.pending_dir.rmdir()  # only succeeds when no other run is open
        return parquet_path

    def write_run(self, rows, run_id=None):
        """Append and commit in one call; returns the run id."""
        run_id = run_id or new_run_id()
        self.append_rows(run_id, rows)
        self.commit_run(run_id)
        return run_id

    def pending_run_ids(self):
        """Runs with journaled rows that were never committed (e.g. a sweep that crashed)."""
        if not self.pending_dir.is_dir():
            return []
        return sorted(p.stem for p in self.pending_dir.glob("*.jsonl"))

    def read_pending(self, run_id):
        """The rows journaled so far for an open run (to resume it)."""
        self._check_run_id(run_id)
        return self._read_journal(self.pending_dir / f"{run_id}.jsonl")

    # ---- reading --------------------------------------------------------------------------
    def scan(self):
        """Read every run file; unreadable or foreign files become warnings, never errors."""
        result = ScanResult()
        if not self.runs_dir.is_dir():
            return result
        manifest, problem = self._read_manifest()
        if problem:
            result.warnings.append(f"{self.manifest_path}: {problem}; run files read without it")
        checksums = {e["run_id"]: e.get("sha256") for e in manifest["runs"]}
        by_stem = {}
        for path in sorted(self.runs_dir.iterdir()):
            if path.name.startswith(".") and ".tmp-" in path.name:
                result.warnings.append(f"{path}: leftover temp file of an interrupted write "
                                       "(safe to delete); skipped")
            elif path.suffix in (".parquet", ".csv") and path.is_file():
                by_stem.setdefault(path.stem, {})[path.suffix] = path
            else:
                result.warnings.append(f"{path}: not a .parquet or .csv run file; skipped")
        for stem, files in by_stem.items():
            frame = None
            if ".parquet" in files:
                frame, error = _read_run_file(files[".parquet"], stem)
                if error:
                    action = "using its CSV mirror" if ".csv" in files else "skipped"
                    result.warnings.append(f"{files['.parquet']}: {error}; {action}")
                elif checksums.get(stem) and _sha256(files[".parquet"]) != checksums[stem]:
                    result.warnings.append(f"{files['.parquet']}: differs from the checksum in "
                                           "manifest.json (changed after it was written)")
            if frame is None and ".csv" in files:
                frame, error = _read_run_file(files[".csv"], stem)
                if error:
                    result.warnings.append(f"{files['.csv']}: {error}; skipped")
            if frame is not None:
                result.frames[stem] = frame
        return result

    def load(self, run_ids=None, quiet=False):
        """All rows of the given runs (default: every readable run) as one DataFrame.

        Skipped files are listed in ``self.warnings`` and ``df.attrs['warnings']`` and printed to
        stderr unless ``quiet``.
        """
        scan = self.scan()
        self.warnings = list(scan.warnings)
        if not quiet:
            for line in scan.warnings:
                print(f"ralp-bench: warning: {line}", file=sys.stderr)
        ordered = _chronological(scan.frames)
        if run_ids is not None:
            missing = [r for r in run_ids if r not in scan.frames]
            if missing:
                raise UserError(f"no run {', '.join(missing)} in {self.runs_dir}; "
                                f"stored runs: {', '.join(ordered) or 'none'}")
            ordered = list(run_ids)
        frames = [scan.frames[r] for r in ordered]
        df = pd.concat(frames, ignore_index=True) if frames else coerce_frame(pd.DataFrame())
        df.attrs["warnings"] = list(scan.warnings)
        return df

    def run_ids(self):
        """Readable runs, oldest first (by started_at, then run id)."""
        return _chronological(self.scan().frames)

    def latest_run_id(self):
        ids = self.run_ids()
        return ids[-1] if ids else None

    def resolve_run_id(self, text):
        """A full run id, or a unique prefix of one, or 'latest'/'previous'."""
        ids = self.run_ids()
        if text in ("latest", "previous"):
            wanted = 1 if text == "latest" else 2
            if len(ids) < wanted:
                raise UserError(f"no {text} run in {self.runs_dir} ({len(ids)} stored)")
            return ids[-wanted]
        if text in ids:
            return text
        matches = [r for r in ids if r.startswith(text)]
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise UserError(f"no run {text!r} in {self.runs_dir}; stored: {', '.join(ids) or 'none'}")
        raise UserError(f"run id prefix {text!r} is ambiguous: {', '.join(matches)}")

    def manifest(self):
        return self._read_manifest()[0]

    # ---- internals ------------------------------------------------------------------------
    def _run_file(self, run_id):
        return self.runs_dir / f"{run_id}.parquet"

    def _check_run_id(self, run_id):
        if not isinstance(run_id, str) or not _RUN_ID_PATTERN.match(run_id):
            raise UserError(f"bad run id {run_id!r}: use letters, digits, '.', '_' and '-' only")

    def _warn(self, line):
        self.warnings.append(line)
        print(f"ralp-bench: warning: {line}", file=sys.stderr)

    def _read_journal(self, journal):
        if not journal.exists():
            return []
        rows = []
        for number, line in enumerate(journal.read_text(encoding="utf-8").splitlines(), 1):
            try:
                rows.append(new_row(**json.loads(line)))
            except (ValueError, TypeError) as exc:  # a line cut short by a crash
                self._warn(f"{journal}:{number}: unreadable journal line skipped ({exc})")
        return rows

    def _lock(self):
        return dir_lock(self.root)

    def _read_manifest(self):
        empty = {"schema_version": SCHEMA_VERSION, "runs": []}
        if not self.manifest_path.exists():
            return empty, None  # a store without runs yet
        try:
            data = json.loads(self.manifest_path.read_text(encoding="utf-8"))
            if not isinstance(data, dict) or not isinstance(data.get("runs"), list):
                raise ValueError("no 'runs' list")
            return data, None
        except (OSError, ValueError) as exc:
            return empty, f"unreadable ({exc})"

    def _rebuild_manifest(self):
        scan = self.scan()
        entries = []
        for run_id, frame in scan.frames.items():
            parquet = self._run_file(run_id)
            entries.append(_manifest_entry(run_id, frame, parquet if parquet.exists() else None,
                                           parquet.with_suffix(".csv")))
        return {"schema_version": SCHEMA_VERSION, "runs": entries}

    def _write_manifest(self, entries):
        data = {"schema_version": SCHEMA_VERSION,
                "runs": sorted(entries, key=lambda e: (e.get("started_at") or "", e["run_id"]))}
        text = json.dumps(data, indent=2, sort_keys=True) + "\n"
        write_text_atomic(self.manifest_path, text)


def _manifest_entry(run_id, frame, parquet_path, csv_path):
    started = frame["started_at"].dropna()
    commits = frame["git_commit"].dropna()
    versions = frame[VERSION_COLUMN].dropna() if VERSION_COLUMN in frame else []
    return {
        "run_id": run_id,
        "started_at": min(started) if len(started) else None,
        "rows": int(len(frame)),
        "schema_version": int(max(versions)) if len(versions) else SCHEMA_VERSION,
        "models": sorted(set(frame["model"].dropna())),
        "strategies": sorted(set(frame["strategy"].dropna())),
        "git_commit": commits.iloc[0] if len(commits) else None,
        "files": {"parquet": parquet_path.name if parquet_path else None,
                  "csv": csv_path.name if csv_path.exists() else None},
        "sha256": _sha256(parquet_path) if parquet_path else None,
    }


def _read_run_file(path, stem):
    """(frame, None) for a readable result file, (None, reason) otherwise."""
    if path.stat().st_size == 0:
        return None, "empty file"
    try:
        if path.suffix == ".parquet":
            _require_arrow()
            import pyarrow.parquet as pq  # lazy: pyarrow loads only where rows are stored or read
            df = pq.read_table(path).to_pandas()
        else:
            df = pd.read_csv(path, dtype=str, keep_default_na=True)
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001 - any parser error means "not a file we can read"
        kind = "parquet" if path.suffix == ".parquet" else "CSV"
        return None, f"not a readable {kind} file ({type(exc).__name__}: {str(exc)[:120]})"
    missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
    if missing:
        return None, f"not a ralp-bench result file (no column {', '.join(missing)})"
    if df.empty:
        return None, "no rows"
    if VERSION_COLUMN in df.columns:
        versions = pd.to_numeric(df[VERSION_COLUMN], errors="coerce").dropna()
        version = int(versions.max()) if len(versions) else 0
    else:
        version = 0
    if version > SCHEMA_VERSION:
        return None, (f"written with schema version {version}, newer than this ralp-bench "
                      f"({SCHEMA_VERSION}); upgrade ralp-bench to read it")
    df = migrate(df.drop(columns=[VERSION_COLUMN], errors="ignore"), version)
    df["run_id"] = df["run_id"].where(df["run_id"].notna(), stem)
    return df, None


def _chronological(frames):
    def key(run_id):
        started = frames[run_id]["started_at"].dropna()
        return (min(started) if len(started) else "", run_id)
    return sorted(frames, key=key)


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _write_once(final, write):
    """Like ``write_atomic`` (bench/store/atomic.py) but fails instead of replacing an existing file (link is atomic)."""
    tmp = write_temp(final, write)
    try:
        os.link(tmp, final)
    except FileExistsError:
        raise RunExistsError(f"{final} already exists; run files are write-once") from None
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(final.parent)
