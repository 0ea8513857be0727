"""`ralp-bench models`: what the zoo holds and how FC-heavy each model is."""
from bench.models import MODELS, get_model
from bench.models.registry import get_spec


def register(subparsers):
    p = subparsers.add_parser("models", help="list the model zoo: input shape, parameters, FC share")
    p.add_argument("names", nargs="*", help="only these models (default: all)")
    p.add_argument("--cpu-only", action="store_true", help="only the CPU-sized models (fast)")
    p.set_defaults(func=run)


def parameter_split(model):
    """(total parameters, parameters in Dense layers), walking nested models."""
    import tensorflow as tf

    def dense_params(layer):
        if isinstance(layer, tf.keras.Model):
            return sum(dense_params(inner) for inner in layer.layers)
        return layer.count_params() if isinstance(layer, tf.keras.layers.Dense) else 0

    return model.count_params(), dense_params(model)


def run(args):
    from rich.console import Console
    from rich.table import Table

    names = args.names or [n for n, s in MODELS.items() if s.cpu_sized or not args.cpu_only]
    specs = [get_spec(n) for n in names]  # validate every name before building anything
    table = Table(title="ralp-bench model zoo")
    for col in ("model", "input", "classes", "parameters", "FC share", "description"):
        table.add_column(col, justify="right" if col in ("parameters", "FC share", "classes") else "left")
    for spec in specs:
        total, fc = parameter_split(get_model(spec.name))
        table.add_row(spec.name, "x".join(map(str, spec.input_shape)), str(spec.num_classes),
                      f"{total:,}", f"{100.0 * fc / total:.1f}%", spec.description)
    Console(width=160).print(table)
    return 0
