"""ralp-bench: the harness that runs the same CNN models under every strategy on equal terms.
Two entry points (``cli``: ``ralp-bench``; ``run``: ``python -m bench.run`` on every MPI rank)
above one package per layer: commands, report, driver, rank, launch, store, core (with models
and data). ARCHITECTURE.md draws them; pyproject.toml's import-linter rule keeps them layered."""
