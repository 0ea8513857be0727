"""The engine's one exception: input the user can fix (an unknown codec, a cut that is not a
layer, a hardware preset that does not exist).

Why here and not in bench: the engine imports nothing above it, so the harness's error type is
this one (bench/core/errors.py re-exports it, and the CLI prints it in one line and exits 2)."""


class UserError(Exception):
    """A problem with the input or the environment that the user can fix."""

    exit_code = 2
