"""The report layer: everything people read, computed from stored rows only (never from a live
run). ``summary`` groups rows per configuration, ``tables`` and ``format`` turn that into the
Markdown tables, ``plots`` draws them, ``document`` writes report.md and its figures; ``paper``
(with ``paper_claims``, ``paper_accuracy``, ``paper_extrapolate``, ``paper_plots``) judges the
paper's claims one by one into results/paper.md; ``published`` checks the cost model against
published GPU-cluster figures (results/published.md).

Why a package of its own: it sits on top of the store and imports no launcher, rank or strategy;
the commands that print or write a report are its only callers."""
