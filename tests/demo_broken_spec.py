"""The spec entry of tests/demo_broken_strategy.py, named in RALP_STRATEGY_MODULES by tests/test_errors.py."""
from bench.core.strategy_specs import StrategySpec, register

register(StrategySpec("broken", "tests.demo_broken_strategy:Broken", "tf",
                      "fails in setup on the chief (test only)", "#000000", codecs=False))
