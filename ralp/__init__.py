"""The placement engine: what a training step of a model costs under each strategy on a given
cluster, and which plan to run. ``profile`` and ``cut`` read a Keras model (its layers, FLOPs,
parameters, activations, the cut points between a conv tower and an FC head); ``links``,
``hardware``, ``codec_spec`` and ``sharding`` describe the cluster, its machines, a codec and
which PS holds which variable; ``step_cost``, ``strategy_costs`` and ``colocated_ps_cost`` say
what each strategy moves and computes, as ordered stages; ``evaluator`` turns any strategy's
stages into time, bottleneck and bound; ``cost_model`` assembles the predicted step; ``analyzer`` chooses the strategy, the cut, the codec and the layout.

Why a package of its own, importing nothing of bench/ or strategies/: the engine is the
product's decision, usable without the harness (``ralp-bench analyze`` needs no cluster), and
the strategies it prices must never be what it is built from."""
