"""The paper document's two figures: bytes per step against workers, and the cost model's
extrapolation to 1,024 workers through the measured points.

Why beside bench/report/plots.py rather than in it: these figures read the paper document's grid and
series (bench/report/paper_claims.py, bench/report/paper_extrapolate.py), not the report's summary; they use
bench/report/plots.py's canvas, colours, fonts and log-axis labels so both documents look alike.
Each function returns the written path, or None when there is nothing to draw.
"""
from matplotlib.ticker import NullLocator

from bench.report import plots
from bench.store.results import is_missing

_MARKERS = ["o", "s", "^", "D", "v", "P", "X"]
TICKS = (2, 4, 8, 16, 64, 256, 1024)
MIN_SPAN = 4.0  # a log axis spans at least this factor: one of 1, 2, 5 x 10^n always falls in it


def bytes_plot(grid, setting, path):
    """Measured bytes per worker per step (sent + received) against workers: a panel per model,
    a line per strategy (codec rows included), for one link setting (bytes do not depend on it)."""
    models = list(dict.fromkeys(c.model for c in grid.cells if c.setting == setting))
    panels = []
    for model in models:
        names = dict.fromkeys(n for c, rows in grid.cells.items() if (c.model, c.setting) == (model, setting)
                              for n in rows if n not in ("auto", "single"))
        lines = {}
        for name in names:
            points = [(w, r["bytes_worker_measured"] / 1e6) for w, r in grid.series(model, setting, name)
                      if not is_missing(r.get("bytes_worker_measured"))]
            if points:
                lines[name] = points
        if lines:
            panels.append((model, lines))
    if not panels:
        return None
    fig, axes = plots._figure(len(panels))
    handles = {}
    for ax, (model, lines) in zip(axes, panels):
        for index, (name, points) in enumerate(lines.items()):
            (line,) = ax.plot([w for w, _ in points], [mb for _, mb in points], marker=_MARKERS[index % len(_MARKERS)],
                              linewidth=2, color=plots._color(name.split(" ")[0]),
                              linestyle="-" if " " not in name else "--", label=name)
            handles.setdefault(name, line)
        workers = sorted({w for points in lines.values() for w, _ in points})
        _axes(ax, f"{model} ({setting})", "MB per worker per step, tx+rx (log scale)")
        ax.set_xscale("log", base=2)
        ax.set_xticks(workers)
        ax.set_xticklabels([str(w) for w in workers])
    fig.suptitle("Bytes per worker per step (1 MB = 10^6 bytes)", fontsize=plots.FONT_SIZE + 2)
    fig.legend(handles.values(), handles.keys(), loc="outside right upper", fontsize=plots.FONT_SIZE,
               title="strategy", title_fontsize=plots.FONT_SIZE)
    return plots._save(fig, path)


def extrapolation_plot(series_list, path):
    """Anchored predicted images/sec (preset's units) from 2 to 1,024 workers, a line per strategy,
    with the measured points as markers: a panel per (model, links)."""
    drawn = [s for s in series_list if s.predicted]
    if not drawn:
        return None
    panels = list(dict.fromkeys((s.model, s.setting) for s in drawn))
    fig, axes = plots._figure(len(panels))
    handles = {}
    for ax, (model, setting) in zip(axes, panels):
        for index, s in enumerate(x for x in drawn if (x.model, x.setting) == (model, setting)):
            color = plots._color(s.name)
            xs = sorted(s.predicted)
            (line,) = ax.plot(xs, [s.predicted[w] for w in xs], color=color, linewidth=1.8, label=s.name)
            ax.scatter([w for w, _ in s.measured], [r for _, r in s.measured], color=color, edgecolors="black",
                       marker=_MARKERS[index % len(_MARKERS)], s=50, zorder=3)
            handles.setdefault(s.name, line)
        _axes(ax, f"{model} ({setting})", "images/sec on the preset's cluster (log scale)")
        ax.set_xscale("log", base=2)
        ax.set_xticks(TICKS)
        ax.set_xticklabels([f"{w:,}" for w in TICKS])
        ax.xaxis.set_minor_locator(NullLocator())
    fig.suptitle("Cost model (lines) through the measured points (markers)", fontsize=plots.FONT_SIZE + 2)
    fig.legend(handles.values(), handles.keys(), loc="outside right upper", fontsize=plots.FONT_SIZE,
               title="strategy", title_fontsize=plots.FONT_SIZE)
    return plots._save(fig, path)


def _axes(ax, title, ylabel):
    ax.set_yscale("log")
    low, high = ax.get_ylim()
    if high < MIN_SPAN * low:  # a narrow range would hold no 1-2-5 tick to label (bytes of one worker count)
        middle = (low * high) ** 0.5
        ax.set_ylim(middle / MIN_SPAN ** 0.5, middle * MIN_SPAN ** 0.5)
    plots.plain_log_labels(ax.yaxis)
    ax.set_title(title, fontsize=plots.FONT_SIZE + 1)
    ax.set_xlabel("workers", fontsize=plots.FONT_SIZE)
    ax.set_ylabel(ylabel, fontsize=plots.FONT_SIZE)
    ax.grid(True, which="both", alpha=0.3)
    ax.tick_params(labelsize=plots.FONT_SIZE - 1)
