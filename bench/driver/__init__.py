"""The driver: what runs on the machine the user typed the command on. It resolves each
configuration into a plan (``planning``, with the engine's analyzer and this machine's or a
host's calibration, ``calibration``), picks the launcher (``clusters``, ``scaling`` for links
scaled to a preset), launches the ranks and turns their result into a row (``harness``), and
runs sweep files (``sweep``) with progress (``progress``).

Why a package of its own: it is the one place that both plans and launches; the ranks below it
only train what they are told, and the report above it reads only stored rows."""
