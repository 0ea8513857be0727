"""`ralp-bench models`: what the zoo holds, or any model --model accepts, and how FC-heavy each is
(parameters and FC share from the profiler, ralp/profile.py, which the cost model reads too)."""
from rich.console import Console
from rich.table import Table

from bench.driver.planning import model_profile
from bench.models import MODELS
from bench.models.build import settled_spec
from bench.models.sources import format_shape, get_spec


def register(subparsers):
    p = subparsers.add_parser("models", help="list the model zoo: input shape, parameters, FC share")
    p.add_argument("names", nargs="*", help="only these models (default: all)")
    p.add_argument("--cpu-only", action="store_true", help="only the CPU-sized models (fast)")
    p.add_argument("--describe", metavar="SPEC", action="append", default=[],
                   help="any model --model accepts (keras:NAME, a .keras/.h5 file, module:function, "
                        "file.py:function), listed like the zoo's; repeatable")
    p.add_argument("--input-shape", default=None, help="with --describe: H,W,C the model takes")
    p.add_argument("--classes", type=int, default=None, help="with --describe: classes the model outputs")
    p.set_defaults(func=run)


def run(args):
    if args.describe:
        specs = [get_spec(s, args.input_shape, args.classes) for s in args.describe]  # spellings first
        title = "ralp-bench models"
    else:
        names = args.names or [n for n, s in MODELS.items() if s.cpu_sized or not args.cpu_only]
        specs = [get_spec(n) for n in names]  # validate every name before building anything
        title = "ralp-bench model zoo"
    table = Table(title=title)
    for col in ("model", "input", "classes", "parameters", "FC share", "cut points", "description"):
        table.add_column(col, justify="right" if col in ("parameters", "FC share", "classes") else "left")
    for spec in specs:
        spec = settled_spec(spec)  # a user's model: built once and checked (bench/models/build.py)
        profile = model_profile(spec)
        total, fc = profile.params, sum(layer.params for layer in profile.layers if layer.is_dense)
        cuts, first = profile.cut_points, profile.first_dense_cut()
        cut_text = f"{len(cuts)}; before the FC head: {first}" if first else f"{len(cuts)}; none before a dense layer"
        table.add_row(spec.name, format_shape(spec.input_shape, "x") or "?", str(spec.num_classes),
                      f"{total:,}", f"{100.0 * fc / total:.1f}%", cut_text, spec.description)
    Console(width=180).print(table)
    return 0
