"""The spec entry of tests/demo_workers_strategy.py: a workers-layout strategy the cost model
does not price (no ``priced_as``), named in RALP_STRATEGY_MODULES by tests/test_distributed.py."""
from bench.core.strategy_specs import StrategySpec, register

register(StrategySpec("mpi-allreduce", "tests.demo_workers_strategy:MpiAllreduce", "workers",
                      "every worker sums gradients with MPI_Allreduce (test only)", "#bcbd22", codecs=False))
