"""`ralp-bench analyze`: profile a model, predict each strategy, and say whether to split.

Why a command of its own: the decision (sync PS, ring all-reduce, or FC-on-PS at a
cut) should be inspectable before anything runs, with the per-layer numbers that
drive it. Without --hardware the preset ``v100-10gbe`` is used (no seconds spent
calibrating); --bandwidth overrides its links. ``--hardware local`` measures this
machine instead, through the one calibration cache ``run`` predicts with
(bench/driver/calibration.py). Each registered strategy the cost model prices is a row under its
spec's label: a plugin priced as sync PS gets sync PS's prediction, as ``run`` records it.
The search is the joint one (ralp/analyzer.py): sync PS in both layouts, the hybrid's head
over 1..--ps PS hosts and its micro-batches; --plot overlays the step times measured in the
result store (``--results``) on links of the same rate, so a prediction can be read against
what the emulated cluster did. Each plan's bound (the least step time it allows on the hardware,
bench/driver/planning.py) is printed beside its predicted step, and in --json as ``bound_step_time_s``.
"""
import argparse
import json
from dataclasses import asdict

from rich.console import Console
from rich.table import Table

from bench.commands.analyze_plot import label_of, measured_points, plot
from bench.commands.help_examples import examples
from bench.core.errors import UserError
from bench.core.strategy_specs import SPECS
from bench.driver.calibration import resolve_hardware
from bench.driver.planning import bound_of, model_profile
from bench.models.build import settled_spec
from bench.models.sources import get_spec
from ralp.analyzer import analyze, compression_candidates
from ralp.cost_model import STRATEGY_LABELS
from ralp.hardware import format_bandwidth


def register(subparsers):
    p = subparsers.add_parser("analyze", help="profile a model and predict sync PS / Horovod / FC-on-PS step times",
                              formatter_class=argparse.RawDescriptionHelpFormatter, epilog=examples(
                                  "ralp-bench analyze --model vgg16 --workers 8 --bandwidth 10gbit",
                                  "ralp-bench analyze --model alexnet --hardware v100-10gbe --workers 16 --ps 2"))
    p.add_argument("--model", required=True,
                   help="a zoo name (see `ralp-bench models`), keras:NAME, a .keras/.h5 file, or module:function / "
                        "file.py:function returning a tf.keras.Model")
    p.add_argument("--input-shape", default=None, help="H,W,C the model takes (default: the model's own)")
    p.add_argument("--classes", type=int, default=None, help="classes the model outputs (default: the model's own)")
    p.add_argument("--batch-size", type=int, default=32, help="images per worker per step (default 32)")
    p.add_argument("--workers", type=int, default=2, help="number of workers (default 2)")
    p.add_argument("--ps", type=int, default=1,
                   help="most parameter-server hosts available: sync PS and FC-on-PS use them all, the hybrid "
                        "shards its head over 1..N of them (default 1)")
    p.add_argument("--micro-batches", default="auto", metavar="N|auto",
                   help="the hybrid's pipelined micro-batches per step (dividing --batch-size); auto: search "
                        "1, 2, 4, 8 (default)")
    p.add_argument("--hybrid-bucket-mb", default="auto", metavar="MB|auto",
                   help="the hybrid's ring buckets in MiB of fp32 tower gradients (0: one fused ring); auto: "
                        "search 0, 1, 4 and 16 (default auto)")
    p.add_argument("--bandwidth", help="link speed of every host, e.g. 10gbit, 100mbit (default: the hardware's)")
    p.add_argument("--ps-bandwidth", help="link speed of each PS host if different, e.g. 40gbit")
    p.add_argument("--latency", help="one-way latency, e.g. 0.1ms, 50us (default: the hardware's)")
    p.add_argument("--hardware", help="preset (v100-10gbe, a100-ib100, h100-400g, local) or a JSON file "
                                      "(default: v100-10gbe)")
    p.add_argument("--compression", default=None, help="none | fp16 | int8 | topk:FRACTION | auto (gradient traffic; auto: the analyzer "
                        "picks the codec as well)")
    p.add_argument("--overlap", action="store_true", help="assume communication fully overlaps computation")
    p.add_argument("--all-cuts", action="store_true", help="also try cuts that put convolutions on the PS")
    p.add_argument("--json", action="store_true", help="print machine-readable JSON instead of tables")
    p.add_argument("--plot", metavar="FILE.png", help="plot predicted step time vs workers (1..1024), with the "
                                                       "measured step times of --results on the same links")
    p.add_argument("--results", default="results", metavar="DIR",
                   help="result store whose measured runs --plot overlays (default: results)")
    p.set_defaults(func=run)


def _bucket_mb(args):
    """--hybrid-bucket-mb: None (auto: searched) or MiB >= 0."""
    text = str(args.hybrid_bucket_mb).strip().lower()
    if text == "auto":
        return None
    try:
        mb = float(text)
    except ValueError:
        mb = -1.0
    if not mb >= 0:
        raise UserError(f"--hybrid-bucket-mb expects MiB >= 0 (0: one fused ring) or auto, got {args.hybrid_bucket_mb!r}")
    return mb


def _validate(args):
    for flag, value in (("--batch-size", args.batch_size), ("--workers", args.workers), ("--ps", args.ps)):
        if value <= 0:
            raise UserError(f"{flag} must be a positive integer, got {value}")
    if args.plot and not args.plot.lower().endswith(".png"):
        raise UserError(f"--plot expects a .png file name, got {args.plot!r}")
    text = str(args.micro_batches).strip().lower()
    if text == "auto":
        return None
    if not text.isdigit() or int(text) <= 0:
        raise UserError(f"--micro-batches expects a positive integer or auto, got {args.micro_batches!r}")
    if args.batch_size % int(text):
        raise UserError(f"--micro-batches {text} does not divide --batch-size {args.batch_size}")
    return int(text)


def run(args) -> int:
    micro_batches = _validate(args)
    bucket_mb = _bucket_mb(args)
    spec = get_spec(args.model, args.input_shape, args.classes)  # a bad spelling fails before building anything
    compression = None if args.compression in (None, "none") else args.compression
    compression_candidates(compression)  # a bad spec fails before the model is built
    hardware = resolve_hardware(args.hardware, bandwidth=args.bandwidth, ps_bandwidth=args.ps_bandwidth,
                                latency=args.latency)

    profile = model_profile(settled_spec(spec))  # a user's model is checked first (bench/models/build.py)
    settings = dict(batch_size=args.batch_size, workers=args.workers, ps=args.ps, hardware=hardware,
                    compression=compression, overlap=args.overlap, all_cuts=args.all_cuts, search_layouts=True,
                    micro_batches=micro_batches, hierarchical=None, hybrid_bucket_mb=bucket_mb)
    plan = analyze(profile, **settings)
    if args.plot:
        measured = measured_points(args.results, args.model, args.batch_size, hardware.worker_bandwidth)
        plot(profile, settings, args.plot, measured)
    if args.json:
        print(json.dumps(_as_json(profile, plan, hardware, settings), indent=2))
    else:
        _print_tables(profile, plan, hardware, settings, args.plot)
    return 0


# ----------------------------------------------------------------------------- output

def _bound(profile, plan, hardware, p):
    """``p``'s plan priced as its bound, the least step time it allows on ``hardware``
    (bench/driver/planning.py ``bound_of``)."""
    return bound_of(profile, p, hardware, plan.compression)


def _bound_table(profile, plan, hardware):
    """Each plan's bound beside its predicted step: how much of the step the plan's own order
    of work costs (fraction of bound = bound / predicted step), and which resource sets the bound."""
    table = Table(title="Bound per plan: every resource busy at once (each host's compute, each link direction "
                        "at line rate, one latency)")
    for col in ("strategy", "layout", "step time", "bound", "fraction of bound", "bound set by"):
        table.add_column(col, justify="left" if col in ("strategy", "layout", "bound set by") else "right")
    for name, label, p in priced_rows(plan):
        least = _bound(profile, plan, hardware, p)
        table.add_row(label, layout(p), f"{p.step_time_s:.3g} s", f"{least.step_time_s:.3g} s",
                      f"{least.step_time_s / p.step_time_s:.2f}", least.bottleneck,
                      style="bold green" if name == plan.strategy else None)
    return table


def _as_json(profile, plan, hardware, settings):
    def prediction(p):
        return dict(asdict(p), worker_bytes=p.worker_bytes, images_per_s=p.images_per_s,
                    bound_step_time_s=_bound(profile, plan, hardware, p).step_time_s)

    return {
        "model": profile.name, "params": profile.params, "trainable_params": profile.trainable_params,
        "forward_flops_per_image": profile.flops,
        "settings": {k: v for k, v in settings.items() if k != "hardware"},
        "hardware": asdict(hardware),
        "layers": [asdict(l) for l in profile.layers],
        "cut_points": profile.cut_points, "first_dense_cut": profile.first_dense_cut(),
        "predictions": {s: prediction(p) for s, p in plan.predictions.items()},
        "plan": {"strategy": plan.strategy, "cut": plan.cut, "split": plan.split,
                 "ps": plan.ps, "ps_placement": plan.ps_placement, "micro_batches": plan.micro_batches,
                 "hybrid_bucket_mb": (plan.predictions["ralp-hybrid"].hybrid_bucket_mb
                                      if "ralp-hybrid" in plan.predictions else None),
                 "hybrid_buckets": {f"{mb:g}": p.step_time_s for mb, p in plan.hybrid_buckets.items()},
                 "split_possible": plan.split_possible, "compression": plan.compression or "none",
                 "step_time_by_compression": {codec: p.predictions[p.strategy].step_time_s
                                              for codec, p in plan.by_compression.items()},
                 "reason": plan.reason,
                 "hybrid_variants": [{"ps": S, "micro_batches": m, "cut": p.cut, "step_time_s": p.step_time_s}
                                     for (S, m), p in sorted(plan.hybrid_variants.items())],
                 "sync_ps_layouts": {layout: p.step_time_s for layout, p in plan.ps_layouts.items()}},
        "notes": profile.notes,
    }


def priced_rows(plan):
    """(strategy, label, prediction), fastest first: every registered strategy one of the
    analyzer's cost functions prices (``priced_as``; not the one-process reference, whose step is
    one batch, not W), then any prediction no such strategy shows, under its cost function's label."""
    specs = [s for s in SPECS.values() if s.priced_as in plan.predictions and not s.one_batch_per_step]
    rows = [(s.name, s.label, _prediction_of(s, plan)) for s in specs]
    shown = {s.priced_as for s in specs}
    rows += [(name, label_of(name), p) for name, p in plan.predictions.items() if name not in shown]
    return sorted(rows, key=lambda row: row[2].step_time_s)


def _prediction_of(spec, plan):
    """The prediction of ``spec``'s cost function in a layout it can run: a strategy that cannot
    colocate its PS tasks gets sync PS's dedicated layout where the search picked colocated."""
    p = plan.predictions[spec.priced_as]
    if p.ps_placement == "colocated" and not spec.colocatable:
        return plan.ps_layouts.get("dedicated", p)
    return p


def layout(p) -> str:
    """Where a prediction's PS tasks sit and how its step is split: '-' without a PS (Horovod's
    hierarchical all-reduce: 'hierarchical')."""
    if p.ps == 0:
        return "hierarchical" if getattr(p, "hierarchical", False) else "-"
    if p.ps_placement == "colocated":
        return f"colocated ({p.ps} PS)"
    return f"{p.ps} PS" + (f", {p.micro_batches} micro-batches" if p.micro_batches > 1 else "")


def _si(value: float, unit: str = "") -> str:
    for prefix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.0f} {unit}".rstrip()


def _print_tables(profile, plan, hardware, settings, plot_path):
    console = Console(width=max(Console().width, 160))
    cuts = set(profile.cut_points)
    layers = Table(title=f"{profile.name}: {profile.params:,} parameters, "
                         f"{_si(profile.flops, 'FLOP')} forward per image")
    for col, justify in (("#", "right"), ("layer", "left"), ("type", "left"), ("params", "right"),
                         ("FLOPs/image", "right"), ("activation floats", "right"), ("cut?", "center")):
        layers.add_column(col, justify=justify)
    first_dense = profile.first_dense_cut()
    for i, layer in enumerate(profile.layers, start=1):
        mark = "FC split" if layer.name == first_dense else ("yes" if layer.name in cuts else "")
        layers.add_row(str(i), layer.name, layer.type, f"{layer.params:,}", _si(layer.flops),
                       f"{layer.out_floats:,}", mark)
    console.print(layers)

    hw = (f"{hardware.name} ({'preset' if hardware.is_preset else 'measured'}): worker "
          f"{_si(hardware.worker_conv_flops, 'FLOP/s')} conv / {_si(hardware.worker_dense_flops, 'FLOP/s')} dense, "
          f"PS {_si(hardware.ps_flops, 'FLOP/s')}, links {format_bandwidth(hardware.worker_bandwidth)} "
          f"(PS {format_bandwidth(hardware.ps_bandwidth)}), latency {hardware.latency_s * 1e6:g} us")
    console.print(f"[bold]Hardware[/bold] {hw}")
    console.print(f"[dim]{hardware.description}[/dim]")

    title = (f"Predicted step: {settings['workers']} workers x {settings['batch_size']} images, "
             f"up to {settings['ps']} PS, {'overlapped' if settings['overlap'] else 'no overlap'}"
             + (f", compression {settings['compression']}" if settings["compression"] else "")
             + (f" (picked: {plan.compression or 'none'})" if settings["compression"] == "auto" else ""))
    table = Table(title=title)
    for col in ("strategy", "layout", "cut", "step time", "images/s", "compute", "comm", "worker tx", "worker rx",
                "PS tx", "PS rx", "bottleneck"):
        table.add_column(col, justify="left" if col in ("strategy", "layout", "cut", "bottleneck") else "right")
    for name, label, p in priced_rows(plan):
        style = "bold green" if name == plan.strategy else None
        table.add_row(label, layout(p), p.cut or "-", f"{p.step_time_s:.3g} s", f"{p.images_per_s:,.0f}",
                      f"{p.compute_s:.3g} s", f"{p.comm_s:.3g} s", _si(p.worker_tx_bytes, "B"),
                      _si(p.worker_rx_bytes, "B"), _si(p.ps_tx_bytes, "B"), _si(p.ps_rx_bytes, "B"),
                      p.bottleneck, style=style)
    console.print(table)
    choice = (STRATEGY_LABELS[plan.strategy] + f" ({layout(plan.predictions[plan.strategy])})"
              + (f", cut after {plan.cut!r}" if plan.cut else ""))
    console.print(_bound_table(profile, plan, hardware))
    console.print(f"[bold]Plan:[/bold] {choice}")
    console.print(plan.reason, highlight=False)
    for note in profile.notes:
        console.print(f"[yellow]note:[/yellow] {note}")
    if plot_path:
        console.print(f"plot written to {plot_path}")
