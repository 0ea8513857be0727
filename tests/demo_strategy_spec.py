"""The one spec entry of the test-only strategy (tests/demo_strategy.py). Named in
RALP_STRATEGY_MODULES, it is imported by bench/core/strategy_specs.py on the driver and on every rank."""
from bench.core.strategy_specs import StrategySpec, register

register(StrategySpec("ps-reduce0", "tests.demo_strategy:ReduceOnWorker0", "tf",
                      "sync PS that averages on worker 0 and pushes once (test only)", "#17becf", codecs=False,
                      label="PS reduced on worker 0"))
