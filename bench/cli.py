"""`ralp-bench`: one entry point, one sub-command per module in bench/commands.

Each module in ``COMMANDS`` exposes ``register(subparsers)``, which adds its
parser and sets ``func`` (a callable taking the parsed args and returning an
exit code). Settings are parsed once here; commands never re-parse argv.
"""
import argparse
import importlib
import os
import signal
import sys
import threading

from bench.core.errors import UserError, one_line, traceback_to_log
from bench.launch import processes

# Order is the order shown in --help.
COMMANDS = ["doctor", "models", "analyze", "run", "sweep", "cluster", "report", "paper"]


def build_parser():
    parser = argparse.ArgumentParser(
        prog="ralp-bench",
        description="Benchmark distributed CNN training: TensorFlow PS, Horovod and RALP layer placement.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"bench.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"bench.commands.{name}":
                continue  # command not built yet
            raise
        module.register(subparsers)
    return parser


def _stop_on_signals():
    """Ctrl-C and `kill` must unwind through the cleanup (the finally blocks that stop mpirun's
    process group and remove namespaces). A shell that starts us in the background hands us
    SIGINT ignored, and Python's default SIGTERM ends the process without unwinding: so both
    are set here, SIGINT to KeyboardInterrupt, SIGTERM to SystemExit(143)."""
    if threading.current_thread() is not threading.main_thread():
        return
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _exit_on_sigterm)


def _interrupt(signum, frame):
    """Ctrl-C: KeyboardInterrupt, recorded first, since Python may drop it (processes.interrupted)."""
    raise processes.interrupted(KeyboardInterrupt())


class Terminated(SystemExit):
    """SIGTERM, as an exit that unwinds (``with`` blocks tear clusters down on the way)."""


def _exit_on_sigterm(signum, frame):
    print("ralp-bench: terminated", file=sys.stderr)
    raise processes.interrupted(Terminated(128 + signum))


def main(argv=None):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    _stop_on_signals()
    try:
        parser = build_parser()  # imports the commands, and through them RALP_STRATEGY_MODULES' plugins
    except UserError as exc:
        print(f"ralp-bench: error: {one_line(str(exc))}", file=sys.stderr)
        return exc.exit_code
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except UserError as exc:
        print(f"ralp-bench: error: {one_line(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        processes.stop_started()  # a launch the interrupt caught while it was being started
        print("ralp-bench: interrupted", file=sys.stderr)
        return 130
    except Terminated:
        processes.stop_started()
        raise
    except Exception as exc:  # a bug of ours: one line here, the traceback in a log file
        log = traceback_to_log(exc, f"{args.command}-internal-error")
        print(f"ralp-bench: internal error: {one_line(f'{type(exc).__name__}: {exc}')}; traceback in {log} "
              "(please report it)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
