"""Where ralp-bench keeps what it measured or built for reuse: ``$RALP_CACHE``, default
``~/.cache/ralp-bench``. ci/setup.sh's Horovod wheels (``wheels/``), the calibration
(bench/driver/calibration.py), zoo models' profiles (bench/driver/profile_cache.py) and the logs
of failures (bench/core/errors.py) live under it; one definition, read by each of them.
"""
import os
from pathlib import Path


def cache_dir() -> Path:
    return Path(os.environ.get("RALP_CACHE") or Path.home() / ".cache" / "ralp-bench")
