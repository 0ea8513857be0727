"""One module per ``ralp-bench`` subcommand (``run``, ``sweep``, ``analyze``, ``report``,
``paper``, ``doctor``, ``cluster``, ``models``), each with ``register`` (its flags) and the
function it runs, and ``help_examples`` (the examples each ``--help`` shows, which the README
test runs as typed). Only bench/cli.py imports them: a command is a thin layer that turns flags
into the driver's or the report's calls."""
