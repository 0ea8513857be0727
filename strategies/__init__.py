"""The training strategies: how one step of the same model is built in TensorFlow, one module
each. Baselines: ``single`` (one process, the scaling reference), ``ps`` (sync PS, dedicated or
colocated), ``ps_async`` (TF's ParameterServerStrategy), ``horovod`` (ring all-reduce). RALP:
``ralp_placement`` (the FC head on the PS), ``ralp_hybrid`` (towers ring-all-reduced among the
workers, the head on the PS), with ``sharded_head`` and ``ring`` (the in-graph all-reduce).

Why a package of its own: these are the modules that train; the engine below them (ralp/:
profile, cost model, analyzer) prices and chooses them without importing any, and the harness
above loads one by its spec (bench/core/strategy_specs.py) on each rank."""
