import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def ralp_bench(*args, timeout=600, cwd=None):
    """Run the real CLI in a subprocess; return CompletedProcess (text)."""
    return subprocess.run([sys.executable, "-m", "bench.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd or ROOT, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})


@pytest.fixture
def cli():
    return ralp_bench
