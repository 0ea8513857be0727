"""Careful file reading for the data layer: every failure becomes a UserError naming the file.

Data sets come from the user's own directory, so a half-copied tarball, a gzip with a bad CRC or a
text file saved under a pickle's name are expected, not exceptional. These helpers turn each of
those into one line that names the exact file and the fix, before any worker process is launched.
"""
import gzip
import hashlib
import io
import os
import pickle
import zlib

import numpy as np

from bench.core.errors import UserError


def require_dir(path, what):
    """Return ``path`` if it is a directory, else raise a UserError saying what it should hold."""
    if path is None:
        raise UserError(f"{what} needs --data-dir pointing at a directory with its files")
    path = os.path.abspath(os.path.expanduser(str(path)))
    if not os.path.exists(path):
        raise UserError(f"data directory {path} does not exist; pass --data-dir with the {what} files")
    if not os.path.isdir(path):
        raise UserError(f"--data-dir {path} is a file, not a directory; pass the directory holding the {what} files")
    return path


def read_bytes(path):
    """Whole file as bytes; a ``.gz`` file is decompressed and its CRC and length checked."""
    try:
        if not str(path).endswith(".gz"):
            with open(path, "rb") as handle:
                return handle.read()
        with gzip.open(path, "rb") as handle:
            return handle.read()
    except (gzip.BadGzipFile, zlib.error, EOFError) as exc:
        raise UserError(f"{path} is a corrupt or truncated gzip file ({exc}); download it again") from None
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror or exc}") from None


def sha256_prefix(paths, length=12):
    """Short content hash of one or more files, recorded in results so a run names its exact data."""
    digest = hashlib.sha256()
    for path in sorted(paths):
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()[:length]


def describe_source(paths, label=None):
    """``"<where> sha256:<prefix>"`` for a Dataset's ``source`` field."""
    paths = [str(p) for p in paths]
    where = label or (paths[0] if len(paths) == 1 else os.path.dirname(paths[0]))
    return f"{where} sha256:{sha256_prefix(paths)}"


class _ArraysOnlyUnpickler(pickle.Unpickler):
    """Unpickler that only rebuilds numpy arrays and plain containers.

    CIFAR-10's python format is pickled; a pickle from an arbitrary directory could run code, so
    only the globals a numpy array needs are allowed through.
    """

    ALLOWED = {
        ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
        ("numpy", "ndarray"), ("numpy", "dtype"),
        ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
        ("builtins", "list"), ("builtins", "dict"), ("builtins", "bytes"),
        ("_codecs", "encode"),
    }

    def find_class(self, module, name):
        if (module, name) in self.ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to load global {module}.{name}")


def load_pickle(path):
    """Unpickle a CIFAR-style batch (latin1/bytes keys) with errors that name the file."""
    raw = read_bytes(path)
    if not raw:
        raise UserError(f"{path} is empty; copy the file again")
    try:
        return _ArraysOnlyUnpickler(io.BytesIO(raw), encoding="bytes").load()
    except EOFError:
        raise UserError(f"{path} is a truncated pickle ({len(raw)} bytes); copy the file again") from None
    except (pickle.UnpicklingError, ValueError, TypeError, AttributeError, IndexError, KeyError) as exc:
        if "truncated" in str(exc):
            raise UserError(f"{path} is a truncated pickle ({len(raw)} bytes); copy the file again") from None
        raise UserError(f"{path} is not a CIFAR-10 python pickle ({exc}); "
                        "use the files from cifar-10-python.tar.gz") from None


def to_unit_float(pixels):
    """uint8 pixels -> float32 in [0, 1], the normalization every real data set here uses."""
    return np.asarray(pixels, dtype=np.float32) * np.float32(1.0 / 255.0)
