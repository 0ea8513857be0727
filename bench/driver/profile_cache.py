"""Zoo models' profiles kept on disk, so a driver that plans from a warm cache imports no TensorFlow.

Why: a profile (ralp/profile.py) is read off the built Keras model, and building one means
importing TensorFlow: about 4 CPU-seconds on a 2-core VM, nearly all of an ``analyze`` and of a
``run`` driver's own CPU, paid again by every process (the test suite starts hundreds). The
profile depends only on the model's definition, so it is kept under a key of everything that
defines it: the model's spec, the source files of the zoo (bench/models/) and of the profiler,
and the TensorFlow and Keras versions. A change to any of them is a new key, never a stale
profile. A zoo name and ``keras:`` applications are kept; a user's file or function is profiled
each time (its module may import files no digest here covers).

Each entry is one file written whole (bench/store/atomic.py): two drivers profiling at once both write
the same text, and a reader sees a whole file or none. An unreadable entry is profiled again.
"""
import hashlib
import json
from dataclasses import astuple
from functools import lru_cache
from pathlib import Path
from typing import Callable

from bench.core.cache import cache_dir
from bench.store.atomic import write_text_atomic
from bench.store.environment import package_version
from ralp.profile import ModelProfile

# The sources a zoo model's profile is computed from: the zoo's builders and the profiler.
_SOURCES = [Path(__file__).resolve().parents[1] / "models", Path(__file__).resolve().parents[2] / "ralp"]
KEPT_KINDS = ("zoo", "keras")


@lru_cache(maxsize=1)
def _definitions_digest() -> str:
    """What every zoo model's profile is computed from, read once per process: the sources and
    the TensorFlow and Keras versions."""
    digest = hashlib.sha256(f"{package_version('tensorflow', 'tensorflow-cpu')}|{package_version('keras')}".encode())
    for root in _SOURCES:
        for path in sorted(root.glob("*.py")):
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def key(spec) -> str:
    """The entry's name: a digest of the spec and of the definitions it is built from."""
    return hashlib.sha256(f"{astuple(spec)!r}\n{_definitions_digest()}".encode()).hexdigest()[:32]


def cached_profile(spec, profile: Callable[[], ModelProfile]) -> ModelProfile:
    """``spec``'s profile from the disk cache, else ``profile()``, kept for the next process."""
    if spec.kind not in KEPT_KINDS:
        return profile()
    path = cache_dir() / "profiles" / f"{spec.name.replace(':', '-').replace('/', '-')}-{key(spec)}.json"
    try:
        return ModelProfile.from_json(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        pass
    found = profile()
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(found.to_json()))
    return found
