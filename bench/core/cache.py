"""Where ralp-bench keeps what it measured or built for reuse: ``$RALP_CACHE``, default
``~/.cache/ralp-bench``. ci/setup.sh's Horovod wheels (``wheels/``), the calibration
(bench/driver/calibration.py), zoo models' profiles (bench/driver/profile_cache.py) and the logs
of failures (bench/core/errors.py) live under it; one definition, read by each of them.
"""
import os
import sys
from pathlib import Path
from typing import Optional

HOROVOD_VERSION = "0.28.1"  # what ci/setup.sh builds


def cache_dir() -> Path:
    return Path(os.environ.get("RALP_CACHE") or Path.home() / ".cache" / "ralp-bench")


def cached_horovod_wheel(tf_version: str) -> Optional[str]:
    """The newest Horovod wheel ci/setup.sh built and cached for ``tf_version`` and this Python
    (``wheels/horovod-VERSION-tfTF-cpXY-OPS/``), or None."""
    python = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    found = sorted((cache_dir() / "wheels").glob(f"horovod-{HOROVOD_VERSION}-tf{tf_version}-{python}-*/horovod-*.whl"))
    return str(found[-1]) if found else None
