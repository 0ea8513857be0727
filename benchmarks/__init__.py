"""airspeed velocity (asv) suite: regression tracking for ralp-bench.

Why nothing is put on sys.path here: asv builds each commit it measures into its
own env (asv.conf.json: one virtualenv, the commit's wheel installed ``--no-deps``
by ci/asv-install) and imports only this directory from the working tree. So
``bench``/``ralp``/``strategies`` below, and the MPI ranks the training benchmarks
start with the env's python, are the measured commit's code, not the checkout's.
asv loads this package by its own name only (asv_runner's SpecificImporter), so the
checkout's ``bench/`` beside it never shadows the installed one. Hence also: the
suite may import only what every commit it measures has (old commits included),
and it lives here, asv's default ``benchmark_dir``, outside the wheel.

Modules: ``common`` (profile knob, asv settings base class), ``bench_planning``
(cheap cost-model benchmarks), ``bench_training`` (real distributed runs),
``bench_links`` (link efficiency of the emulated cluster).
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
