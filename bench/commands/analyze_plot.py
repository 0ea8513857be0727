"""`ralp-bench analyze --plot`: predicted step time vs workers, with measured runs overlaid.

Why measured points on a prediction plot: the analyzer's picks are only as good as its
predictions, and the result store already holds what the emulated cluster measured. Rows of
the same model and batch size on links of the analysis' worker rate are drawn as markers in
their strategy's colour (median step time per strategy, layout and worker count), so the
gap between the lines and the markers is the model's error on this setting. The measured
hosts are whatever ran them (often CPU-only emulated hosts, not the analysis' hardware).
Labels and colours are the strategies' own (bench/core/strategy_specs.py), so a registered plugin
strategy is drawn like a built-in one.
"""
import math
from pathlib import Path
from typing import Dict, List, Tuple

from bench.core.errors import UserError
from bench.core.strategy_specs import SPECS
from ralp.analyzer import analyze
from ralp.cost_model import STRATEGY_LABELS
from ralp.hardware import format_bandwidth

PLOT_WORKERS = sorted({round(2 ** (k / 4)) for k in range(41)})  # 1..1024, four points per doubling
LINE_STYLES = {"ps": "--", "ps:dedicated": "--", "ps:colocated": (0, (6, 2, 1, 2)), "horovod": "-.", "ralp": "-", "ralp-hybrid": ":"}
MARKERS = {"ps": "s", "ps:dedicated": "s", "ps:colocated": "D", "horovod": "^", "ralp": "o", "ralp-hybrid": "P"}


def label_of(strategy: str) -> str:
    """A strategy's short label, from its spec; a cost function no registered strategy is named
    after keeps the cost model's label (ralp.cost_model.STRATEGY_LABELS)."""
    spec = SPECS.get(strategy)
    return spec.label if spec else STRATEGY_LABELS.get(strategy, strategy)


def _has_line(strategy: str) -> bool:
    """Measured rows of a registered strategy the cost model prices at W workers have a
    predicted line to sit on (not the one-process reference, nor an unpriced strategy)."""
    spec = SPECS.get(strategy)
    return bool(spec and spec.priced_as and not spec.one_batch_per_step)


def _marker(series: str) -> str:
    """The series' marker, else its strategy's, else that of the cost function pricing it."""
    strategy = series.split(":")[0]
    spec = SPECS.get(strategy)
    return MARKERS.get(series) or MARKERS.get(strategy) or MARKERS.get(spec.priced_as if spec else None, "o")


def measured_points(results_dir, model: str, batch_size: int, link_bps: float) -> Dict[str, List[Tuple[int, float]]]:
    """Median measured step time per (series, workers) of ``model`` at ``batch_size`` on links of
    ``link_bps`` (within 0.1%), from the store at ``results_dir``; series as in LINE_STYLES, a
    hybrid sharded over S > 1 PS hosts as 'ralp-hybrid:S PS'. Empty when nothing matches."""
    from bench.store.results import ResultStore, is_missing  # lazy: pandas loads only where rows are read or written

    if not Path(results_dir).is_dir():
        return {}
    rows = ResultStore(results_dir).load(quiet=True)
    rows = rows[(rows["status"] == "ok") & (rows["model"] == model) & (rows["batch_size"] == batch_size)
                & ((rows["link_bps"] - link_bps).abs() <= 1e-3 * link_bps) & rows["step_time_median_s"].notna()
                & rows["workers"].notna()]
    times: Dict[Tuple[str, int], List[float]] = {}
    for _, row in rows.iterrows():
        strategy = row["strategy"] if is_missing(row["plan"]) else row["plan"]  # auto: what it ran
        if not _has_line(strategy):
            continue
        series = strategy
        if strategy == "ps":
            series = "ps:colocated" if row["ps_placement"] == "colocated" else "ps:dedicated"
        elif strategy == "ralp-hybrid" and not is_missing(row["ps"]) and int(row["ps"]) > 1:
            series = f"ralp-hybrid:{int(row['ps'])} PS"
        times.setdefault((series, int(row["workers"])), []).append(float(row["step_time_median_s"]))
    points: Dict[str, List[Tuple[int, float]]] = {}
    for (series, workers), values in sorted(times.items()):
        values.sort()
        mid = len(values) // 2
        median = values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2
        points.setdefault(series, []).append((workers, median))
    return points


def _predicted(profile, settings):
    """Each series' predicted step time at every PLOT_WORKERS count (sync PS in each layout
    searched), and the hybrid's (S, m) where the analyzer's pick changes."""
    series, changes, last = {}, [], None
    for workers in PLOT_WORKERS:
        plan = analyze(profile, **dict(settings, workers=workers))
        for name, p in plan.predictions.items():
            if name == "ps" and len(plan.ps_layouts) > 1:
                for layout, q in plan.ps_layouts.items():
                    series.setdefault(f"ps:{layout}", {})[workers] = q.step_time_s
            else:
                series.setdefault(name, {})[workers] = p.step_time_s
            if name == "ralp-hybrid" and (p.ps, p.micro_batches) != last:
                last = (p.ps, p.micro_batches)
                changes.append((workers, p.step_time_s, last))
    return series, changes


def _color(strategy: str):
    """A strategy's colour from its spec (None: matplotlib's next, for a cost function no
    registered strategy is named after)."""
    spec = SPECS.get(strategy)
    return spec.color if spec else None


def _label(series: str) -> str:
    strategy, _, extra = series.partition(":")
    return label_of(strategy) + (f", {extra}" if extra else "")


def plot(profile, settings, path, measured=None) -> List[str]:
    """Draw the plot to ``path``; returns its legend's labels. Long because: one figure, its lines, the hybrid's (S, m) marks, the measured markers,
    axes and legend are drawn in sequence; each part is a few lines."""
    import matplotlib  # lazy: matplotlib loads only where a figure is drawn

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: matplotlib loads only where a figure is drawn

    series, changes = _predicted(profile, settings)
    hardware = settings["hardware"]
    fig, ax = plt.subplots(figsize=(9, 5.5), dpi=110)
    for name, times in series.items():  # each strategy in its colour from bench/core/strategy_specs.py
        strategy = name.split(":")[0]
        label = _label(name) + (" (analyzer's PS x micro-batches)" if strategy == "ralp-hybrid" else "")
        ax.plot(list(times), list(times.values()), linestyle=LINE_STYLES.get(name, "-"), color=_color(strategy),
                linewidth=2, label=f"predicted: {label}")
    color = _color("ralp-hybrid")
    for i, (workers, t, (S, m)) in enumerate(changes):  # where the hybrid's pick changes
        ax.plot([workers], [t], "|", color=color, markersize=10)
        ax.annotate(f"{S} PS\u00d7{m}", (workers, t), textcoords="offset points", xytext=(2, 6 if i % 2 else -12),
                    fontsize=7, color=color)
    for i, (name, points) in enumerate(sorted((measured or {}).items())):
        strategy = name.split(":")[0]
        dodge = 2 ** (0.07 * (i - (len(measured) - 1) / 2))  # side by side at the same worker count
        ax.plot([w * dodge for w, _ in points], [t for _, t in points], linestyle="none",
                marker=_marker(name), markersize=8, color=_color(strategy),
                markeredgecolor="black", markeredgewidth=0.8, label=f"measured: {_label(name)} (median)")
    ax.axvline(settings["workers"], color="grey", linewidth=1, alpha=0.6,
               label=f"requested: {settings['workers']} workers")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ticks = [2 ** k for k in range(11)]
    ax.set_xticks(ticks)
    ax.set_xticklabels([str(t) for t in ticks])
    ax.set_xlabel("workers")
    ax.set_ylabel("step time (s, log scale)")
    lows = [t for times in series.values() for t in times.values() if t > 0 and math.isfinite(t)]
    lows += [t for points in (measured or {}).values() for _, t in points]
    ax.set_ylim(min(lows) / 1.5, max(lows) * 1.5)
    ax.set_title(f"{profile.name}, {settings['batch_size']} images/worker, up to {settings['ps']} PS, "
                 f"{format_bandwidth(hardware.worker_bandwidth)} links, {hardware.name}"
                 + (", overlapped" if settings["overlap"] else ""), fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    labels = ax.get_legend_handles_labels()[1]
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0,
              title=("markers: measured in the result store\non links of this rate (on their own hosts)"
                     if measured else "no measured runs on links of this rate"), title_fontsize=7)
    fig.tight_layout()
    try:
        fig.savefig(path)
    except OSError as exc:
        raise UserError(f"cannot write plot {path}: {exc}") from None
    finally:
        plt.close(fig)
    return labels
