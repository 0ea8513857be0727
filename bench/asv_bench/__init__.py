"""airspeed velocity (asv) suite: regression tracking for ralp-bench.

Why a package of its own: asv imports this directory as the top-level package
``asv_bench`` (asv.conf.json's benchmark_dir) and stamps every number with the
commit it was given (``--set-commit-hash HEAD``). So the code measured must be
the checkout this directory sits in, not whatever copy of ``bench``/``ralp`` the
environment happens to have installed: put that checkout first on sys.path here
and on PYTHONPATH for the MPI ranks the training benchmarks start.

Modules: ``common`` (profile knob, asv settings base class), ``bench_planning``
(cheap cost-model benchmarks), ``bench_training`` (real distributed runs).
"""
import os
import sys

CHECKOUT_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _measure_this_checkout():
    if sys.path[:1] != [CHECKOUT_ROOT]:
        sys.path.insert(0, CHECKOUT_ROOT)
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != CHECKOUT_ROOT]
    os.environ["PYTHONPATH"] = os.pathsep.join([CHECKOUT_ROOT] + paths)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


_measure_this_checkout()
