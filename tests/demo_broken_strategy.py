"""A strategy whose chief fails in setup (tests/test_errors.py; its spec: tests/demo_broken_spec.py): what a user sees must be one
line naming the log file, and the log must hold the rank's whole traceback."""
from strategies.base import Strategy


class Broken(Strategy):
    name = "broken"

    def setup(self):
        raise RuntimeError("this strategy always fails in setup (test only)")

    def train_step(self, step):  # pragma: no cover - never reached
        return 0.0

    def evaluate(self):  # pragma: no cover
        return 0.0

    def trainable_weights(self):  # pragma: no cover
        return []

