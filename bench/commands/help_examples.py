"""Examples for a command's --help, in one format that tests/test_readme.py finds and runs.

Every example a help text shows is a command a user will paste, so it must work as typed:
the README test collects the lines this function writes (two spaces, then ``ralp-bench``)
from every command's ``--help`` and runs them like the README's own blocks. A help text shows
the README's own commands where they serve (the test then runs each once: a smoke sweep or a
five-strategy run costs a minute or more).
"""


def examples(*commands: str) -> str:
    return "examples:\n" + "\n".join(f"  {command}" for command in commands)
