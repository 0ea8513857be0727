"""The one exception type users see.

Anything that is the user's to fix (bad flag, missing data, no root for the
emulated cluster, a rank that died) is raised as ``UserError`` with a one-line
message that names the fix; the CLI prints it without a traceback and exits 2.
"""


class UserError(Exception):
    """A problem with the input or the environment that the user can fix."""

    exit_code = 2


class RunFailed(UserError):
    """A distributed run ended abnormally (a rank died, hung or timed out)."""

    exit_code = 3
