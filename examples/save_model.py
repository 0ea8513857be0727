"""Save a model to a .keras file, to bring it to ralp-bench as a file (README, "Bring your own model").

    python examples/save_model.py my_net.keras
    ralp-bench run --model my_net.keras --strategy ps,ralp --dataset mnist

The model is examples/custom_cnn.py's, built with its default MNIST shape; any functional or
Sequential ``tf.keras.Model`` with logits out, saved with ``model.save``, works the same way.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from custom_cnn import build  # noqa: E402  (the example beside this file)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or not argv[0].endswith((".keras", ".h5")):
        raise SystemExit("usage: python examples/save_model.py FILE.keras")
    build().save(argv[0])
    print(f"saved {argv[0]}")


if __name__ == "__main__":
    main()
