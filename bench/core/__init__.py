"""The core every layer reads: run settings (``config``: each declared once, validated once,
frozen), every strategy described once (``strategy_specs``), rank layouts (``roles``), step
statistics (``stats``) and the user-facing error (``errors``). Beside it, in the same layer, the
model zoo and model sources (``bench.models``) and the datasets (``bench.data``).

Why a package of its own: these are the shared descriptions, read by the driver, the ranks, the
strategies and the report alike; they import the engine (ralp) to validate links, hardware and
codecs, never anything above them, and no TensorFlow."""
