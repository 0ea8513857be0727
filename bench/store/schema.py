"""The result rows' schema: field names and types, building rows, typing frames, migrating old files.

One flat row per run configuration (``FIELD_TYPES``, in on-disk column order); ``new_row``
refuses unknown fields, so a typo cannot create a column. Every reader passes frames
through ``coerce_frame``, so a column one file lacks reads as empty, never as an error.
"""
import datetime as _dt
import math
import secrets

import pandas as pd

from bench.core.errors import UserError

SCHEMA_VERSION = 1

_STR, _BOOL, _INT, _FLOAT = "str", "bool", "int", "float"
# Order here is the column order on disk.
FIELD_TYPES = {
    "run_id": _STR, "started_at": _STR, "git_commit": _STR, "git_dirty": _BOOL,
    "tf_version": _STR, "horovod_version": _STR, "mpi_version": _STR, "python_version": _STR,
    "cpu_model": _STR, "cpu_cores": _INT, "gpus": _INT,
    # the GPU stack (bench/store/environment.py gpu_fields); added in schema v1: older files read them as empty
    "gpu_model": _STR, "cuda_version": _STR, "cudnn_version": _STR, "nccl_version": _STR, "nccl_built": _BOOL,
    "hostname": _STR,
    "cluster_mode": _STR, "hosts": _INT, "link_bps": _FLOAT, "ps_link_bps": _FLOAT,
    "latency_s": _FLOAT,
    # link_bps measured by one TCP flow (hosts/Slurm without --bandwidth: bench/launch/link_probe.py
    # measure_line_rate), not stated or built; added in schema v1, older rows read it as empty
    "link_measured": _BOOL,
    "scaled_to": _STR, "cpus_per_host": _FLOAT, "workers_per_host": _INT, "link_pattern": _STR,
    "link_efficiency": _FLOAT,
    # the NIC rate an emulated link's packets were sized for (bench/launch/netns.py shape_link): a scaled link's
    # preset NIC, else the link's own rate; added in schema v1, empty in older rows (their scaled links' packets were
    # sized for the link's rate) and on real links
    "link_packets_bps": _FLOAT,
    "env_forwarded": _STR,  # names (never values) of the variables the driver forwarded to the ranks
    "model": _STR, "input_shape": _STR, "classes": _INT, "model_sha256": _STR, "dataset": _STR,
    "batch_size": _INT, "micro_batches": _INT, "hybrid_bucket_mb": _FLOAT, "global_batch": _INT, "workers": _INT,
    "ps": _INT, "ps_placement": _STR, "strategy": _STR, "plan": _STR, "cut_layer": _STR, "compression": _STR,
    "steps": _INT, "warmup_steps": _INT, "repeat": _INT, "timed_steps": _INT, "target_ci": _FLOAT,
    # the sweep point the row measured (bench/driver/sweep.py SweepPoint.digest), so a resumed sweep runs exactly the
    # points it lacks; added in schema v1: single runs and older journals leave it empty
    "sweep_point": _STR,
    # TF's thread pools per rank as set (--intra-threads, --inter-threads; empty: the defaults, bench/rank/tf_cluster.py
    # thread_counts); added in schema v1 after run 20261207T175500Z-167ffd, whose last row ran 4 inter-op threads
    "intra_threads": _INT, "inter_threads": _INT,
    "images_per_sec": _FLOAT, "step_time_median_s": _FLOAT, "step_time_p10_s": _FLOAT,
    "step_time_p90_s": _FLOAT,
    "bytes_ps_measured": _FLOAT, "bytes_ps_predicted": _FLOAT,
    "bytes_worker_measured": _FLOAT, "bytes_worker_predicted": _FLOAT,
    "predicted_step_time_s": _FLOAT,
    # the least step time the plan allows on its hardware (bench/driver/planning.py bound); added in schema v1
    # after run 20261204T115426Z-30fb48: older rows read it as empty, and the report prices it again
    # where that is sound (bench/driver/planning.py stored_bound)
    "bound_step_time_s": _FLOAT,
    # the cluster host whose CPUs priced compute (bench/driver/calibration.py run_on: hosts/Slurm); empty: the
    # driver's machine under cpus_per_host, or a hardware preset; added in schema v1, older rows read it as empty
    "calibrated_on": _STR,
    # what priced the row (bench/driver/planning.py priced_with): the Hardware and the model's measured step, as
    # JSON, so the row can be priced again exactly after the calibration cache moved on; added in schema v1 at
    # issue 36 (before it, re-pricing had to trust today's cache), older rows read it as empty
    "priced_with": _STR,
    "accuracy": _FLOAT, "target_accuracy": _FLOAT, "steps_to_accuracy": _INT,
    "time_to_accuracy_s": _FLOAT, "final_loss": _FLOAT,
    "horovod_settings": _STR, "cpu_steal": _FLOAT, "tcp_retransmit_max": _FLOAT, "tcp_timeouts": _INT, "step_times_s": _STR,
    "status": _STR, "failure": _STR,
}
SCHEMA_FIELDS = tuple(FIELD_TYPES)
# Stored in every file (not a row field) so a file says which schema wrote it.
VERSION_COLUMN = "schema_version"
# Without these a file is not a result file of ours, whatever its extension.
REQUIRED_COLUMNS = ("model", "strategy")
# v0 (unversioned prototype files, CSV only): no schema_version column, fewer columns,
# and these older names.
V0_RENAMES = {"step_time_s": "step_time_median_s", "bytes_per_step": "bytes_worker_measured",
              "img_per_sec": "images_per_sec"}


# ---------------------------------------------------------------- rows -----------------------

def new_row(**fields):
    """Return a dict with every schema field (None where not given), values coerced to type.

    Unknown field names raise TypeError, like a misspelt keyword argument would.
    """
    unknown = sorted(set(fields) - set(FIELD_TYPES))
    if unknown:
        raise TypeError(f"unknown result field(s) {unknown}; known: {', '.join(SCHEMA_FIELDS)}")
    return {name: _coerce_value(name, fields.get(name)) for name in SCHEMA_FIELDS}


def _coerce_value(name, value):
    kind = FIELD_TYPES[name]
    if is_missing(value):
        return None
    try:
        if kind == _STR:
            return str(value)
        if kind == _BOOL:
            if isinstance(value, str):
                lowered = value.strip().lower()
                if lowered in ("true", "1", "yes"):
                    return True
                if lowered in ("false", "0", "no"):
                    return False
                raise ValueError(value)
            return bool(value)
        if kind == _INT:
            number = float(value)
            if not number.is_integer():
                raise ValueError(value)
            return int(number)
        number = float(value)
        return number if math.isfinite(number) else None
    except (TypeError, ValueError):
        raise ValueError(f"result field {name!r} expects {kind}, got {value!r}") from None


def new_run_id(now=None):
    """A sortable, unique id: UTC timestamp plus 6 random hex digits (20261202T163000Z-ab12cd)."""
    now = now or _dt.datetime.now(_dt.timezone.utc)
    return now.strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


def utc_now_iso():
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


# ---------------------------------------------------------------- frames ---------------------

def coerce_frame(df):
    """Give a frame every schema column with the schema's dtype (nullable ints and bools)."""
    df = df.copy()
    for name, kind in FIELD_TYPES.items():
        if name not in df.columns:
            df[name] = None
        column = df[name]
        if kind == _FLOAT:
            df[name] = pd.to_numeric(column, errors="coerce").astype("float64")
        elif kind == _INT:
            numbers = pd.to_numeric(column, errors="coerce")
            whole = numbers.dropna()
            if (whole == whole.round()).all():
                df[name] = numbers.round().astype("Int64")
            else:
                df[name] = numbers.astype("float64")
        elif kind == _BOOL:
            df[name] = pd.array([_bool_or_none(v) for v in column], dtype="boolean")
        else:
            df[name] = pd.Series([None if is_missing(v) else str(v) for v in column],
                                 index=df.index, dtype="object")
    extra = [c for c in df.columns if c not in FIELD_TYPES]
    return df[list(SCHEMA_FIELDS) + extra]


def _bool_or_none(value):
    try:
        return _coerce_value("git_dirty", value)
    except ValueError:  # garbage in an old or hand-edited file reads as unknown
        return None


def is_missing(value):
    """None, pandas NA/NaT or a float NaN: an empty cell, whatever type its column has."""
    return (value is None or value is pd.NA or value is pd.NaT
            or (isinstance(value, float) and math.isnan(value)))


def migrate(df, file_version):
    """Bring a frame read from a file of schema ``file_version`` up to ``SCHEMA_VERSION``.

    v0 -> v1: renames the prototype's column names and adds missing columns as None.
    """
    if file_version == 0:
        df = df.rename(columns={old: new for old, new in V0_RENAMES.items()
                                if old in df.columns and new not in df.columns})
        if "status" not in df.columns:
            df["status"] = "ok"
    df = coerce_frame(df)
    df[VERSION_COLUMN] = file_version
    return df


def _arrow_schema():
    import pyarrow as pa  # lazy: pyarrow loads only where rows are stored or read
    types = {_STR: pa.string(), _BOOL: pa.bool_(), _INT: pa.int64(), _FLOAT: pa.float64()}
    fields = [pa.field(name, types[kind]) for name, kind in FIELD_TYPES.items()]
    return pa.schema(fields + [pa.field(VERSION_COLUMN, pa.int64())],
                     metadata={b"ralp_bench_schema_version": str(SCHEMA_VERSION).encode()})


def _require_arrow():
    try:
        import pyarrow  # noqa: F401
        import pyarrow.parquet  # noqa: F401
    except ImportError as exc:
        raise UserError(f"pyarrow cannot be imported ({exc}); install a build that matches this "
                        "numpy, e.g. pip install 'pyarrow<24' with numpy<2") from None
