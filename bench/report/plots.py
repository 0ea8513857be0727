"""PNG figures for the report: throughput scaling, bytes per step, predicted against measured.

Why a separate module: plotting code is long and visual, the table code is short and
textual; keeping them apart keeps both readable. Figures are built with the object API on an
Agg canvas (no pyplot), so nothing here touches global matplotlib state or needs a display.
Every function takes the per-configuration summary from ``bench.report.document.summarize`` and
returns the written path, or None when the summary has nothing to draw.
"""
import math

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from bench.core.strategy_specs import AUTO, SPECS
from bench.store.results import is_missing
from ralp.hardware import format_bandwidth

# Each strategy's own colour (bench/core/strategy_specs.py); variants such as ps-colocated get the next free one.
STRATEGY_COLORS = {**{name: spec.color for name, spec in SPECS.items()}, AUTO: "#9467bd"}
_OTHER_COLORS = ["#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]
FONT_SIZE = 11
_LINES = ["-", "--", "-.", (0, (5, 1, 1, 1, 1, 1))]
_MARKERS = ["o", "s", "^", "D", "v"]


_assigned_colors = dict(STRATEGY_COLORS)


def _color(strategy):
    """A stable colour per strategy, the same in every figure of a report."""
    extra = len(_assigned_colors) - len(STRATEGY_COLORS)
    return _assigned_colors.setdefault(strategy, _OTHER_COLORS[extra % len(_OTHER_COLORS)])


def _figure(n_panels, panel_size=(5.2, 3.9)):
    cols = min(3, n_panels)
    rows = math.ceil(n_panels / cols)
    fig = Figure(figsize=(panel_size[0] * cols + 1.8, panel_size[1] * rows + 0.6),
                 layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for extra in axes[n_panels:]:
        extra.set_visible(False)
    return fig, axes[:n_panels]


def _save(fig, path):
    FigureCanvasAgg(fig)
    fig.savefig(path, dpi=110)
    return path


LINK_KEYS = ("link_bps", "ps_link_bps", "scaled_to")


def _link_label(row, extra_keys):
    """A scaled link is named by its preset (its emulated rate changes with the worker count,
    which would split one series per worker count); otherwise by its rate."""
    if "scaled_to" in extra_keys and not is_missing(row.get("scaled_to")):
        return f"scaled to {row['scaled_to']}"
    parts = []
    if "link_bps" in extra_keys and not is_missing(row.get("link_bps")):
        parts.append(format_bandwidth(row["link_bps"]))
    ps_rate = row.get("ps_link_bps")
    if "ps_link_bps" in extra_keys and not is_missing(ps_rate) and ps_rate != row.get("link_bps"):
        parts.append(f"PS {format_bandwidth(ps_rate)}")
    return ", ".join(parts)


def _short(key, value):
    if key == "run_id":  # 20261202T163000Z-ab12cd -> run ab12cd
        return "run " + str(value).rsplit("-", 1)[-1][:12]
    return f"{key}={value}"


def _variant(row, extra_keys):
    """The varying configuration of a row (run, compression, link ...) as a short label."""
    parts = [_short(k, row[k]) for k in extra_keys if k not in LINK_KEYS and not is_missing(row.get(k))]
    link = _link_label(row, extra_keys)
    return ", ".join(parts + ([link] if link else []))


def _series_label(row, extra_keys):
    variant = _variant(row, extra_keys)
    return f"{row['strategy']} ({variant})" if variant else str(row["strategy"])


def _wide_spread(values, factor=10.0):
    positive = [v for v in values if v and v > 0]
    return len(positive) > 1 and max(positive) / min(positive) > factor


def throughput_plot(summary, extra_keys, path):
    """images/sec against workers: one panel per model, one line per strategy (and variant)."""
    ok = summary[(summary["status"] == "ok") & summary["images_per_sec"].notna()
                 & summary["workers"].notna()]
    if ok.empty:
        return None
    models = list(dict.fromkeys(ok["model"]))
    fig, axes = _figure(len(models))
    handles = {}
    for ax, model in zip(axes, models):
        rows = ok[ok["model"] == model]
        series = {}
        for _, row in rows.iterrows():
            series.setdefault(_series_label(row, extra_keys), []).append(row)
        variants = list(dict.fromkeys(_variant(r, extra_keys) for _, r in ok.iterrows()))
        for label, points in series.items():
            points.sort(key=lambda r: int(r["workers"]))
            xs = [int(r["workers"]) for r in points]
            ys = [float(r["images_per_sec"]) for r in points]
            strategy = points[0]["strategy"]
            hollow = strategy == "auto"  # auto usually retraces another strategy's line
            # colour = strategy; line style and marker = variant (run, compression, ...)
            style = variants.index(_variant(points[0], extra_keys))
            (line,) = ax.plot(xs, ys, marker=_MARKERS[style % len(_MARKERS)], linewidth=2,
                              color=_color(strategy), label=label,
                              linestyle=":" if hollow else _LINES[style % len(_LINES)],
                              markersize=9 if hollow else 6,
                              markerfacecolor="none" if hollow else _color(strategy),
                              markeredgewidth=1.6 if hollow else 1, zorder=3 if hollow else 2)
            handles.setdefault(label, line)
        workers = sorted({int(w) for w in rows["workers"]})
        ax.set_xticks(workers)
        ax.set_xlim(min(workers) - 0.5, max(workers) + 0.5)
        ax.set_ylim(bottom=0)
        ax.set_title(model, fontsize=FONT_SIZE + 1)
        ax.set_xlabel("workers", fontsize=FONT_SIZE)
        ax.set_ylabel("images/sec (all workers)", fontsize=FONT_SIZE)
        ax.grid(True, alpha=0.3)
        ax.tick_params(labelsize=FONT_SIZE - 1)
    fig.suptitle("Training throughput against number of workers", fontsize=FONT_SIZE + 2, x=0.02, ha="left")
    fig.legend(handles.values(), handles.keys(), loc="outside right upper", fontsize=FONT_SIZE,
               title="strategy", title_fontsize=FONT_SIZE)
    _fit_legend(fig, handles)
    return _save(fig, path)


def _fit_legend(fig, handles):
    """Room for a legend beside the panels: tall enough for every entry (else it runs over the
    title), wide enough for the longest label."""
    width, height = fig.get_size_inches()
    longest = max((len(label) for label in handles), default=0)
    fig.set_size_inches(max(width, 4.5 + 0.075 * longest * FONT_SIZE / 10 + 2.0),
                        max(height, 0.24 * len(handles) * FONT_SIZE / 10 + 1.2))


def bytes_plot(summary, extra_keys, path):
    """Bytes per step per strategy, measured (solid) beside predicted (hatched), per model.
    (Long because matplotlib wants each panel's bars, labels and legend spelled out.)

    Each panel shows the largest worker count that has byte figures for that model, since
    per-host traffic depends on the worker count for ring all-reduce.
    """
    columns = ["bytes_worker_measured", "bytes_worker_predicted",
               "bytes_ps_measured", "bytes_ps_predicted"]
    has_bytes = (summary[columns].notna().any(axis=1) & (summary["status"] == "ok")
                 & summary["workers"].notna())
    data = summary[has_bytes]
    if data.empty:
        return None
    # Bytes per step do not depend on the link rate: one bar group per strategy (and other
    # variant), taken from the fastest unscaled link, which has the fewest TCP retransmissions.
    link_keys = [k for k in extra_keys if k in LINK_KEYS]
    extra_keys = [k for k in extra_keys if k not in LINK_KEYS]
    links_shown = set()
    if link_keys:
        data = data.assign(_scaled=data["scaled_to"].notna(), _rate=data["link_bps"].fillna(0))
        data = data.sort_values(["_scaled", "_rate"], ascending=[True, False])
        data = data.drop_duplicates(["model", "workers", "strategy"] + extra_keys)
        links_shown = {_link_label(r, link_keys) for _, r in data.iterrows()}
    models = list(dict.fromkeys(data["model"]))
    fig, axes = _figure(len(models), panel_size=(6.0, 4.2))
    bars = [("bytes_worker_measured", "per worker, measured", "#4c72b0", None),
            ("bytes_worker_predicted", "per worker, predicted", "#a6bddb", "//"),
            ("bytes_ps_measured", "PS host, measured", "#dd8452", None),
            ("bytes_ps_predicted", "PS host, predicted", "#fdd0a2", "//")]
    bars = [b for b in bars if data[b[0]].notna().any()]
    width = 0.8 / len(bars)
    handles = {}
    for ax, model in zip(axes, models):
        rows = data[data["model"] == model]
        top_workers = int(rows["workers"].max())
        rows = rows[rows["workers"] == top_workers]
        labels = [_series_label(r, extra_keys) for _, r in rows.iterrows()]
        values = []
        for index, (column, label, color, hatch) in enumerate(bars):
            heights = [v / 1e6 if v is not None and v == v else 0.0 for v in rows[column]]
            values += heights
            xs = [i + (index - (len(bars) - 1) / 2) * width for i in range(len(rows))]
            handle = ax.bar(xs, heights, width=width, color=color, hatch=hatch,
                            edgecolor="#333333", linewidth=0.6, label=label)
            handles.setdefault(label, handle)
        if _wide_spread(values):
            ax.set_yscale("log")
            plain_log_labels(ax.yaxis)
            ax.set_ylabel("MB per step, tx+rx (log scale)", fontsize=FONT_SIZE)
        else:
            ax.set_ylabel("MB per step, tx+rx", fontsize=FONT_SIZE)
        crowded = sum(len(label) for label in labels) > 40
        ax.set_xticks(range(len(rows)))
        ax.set_xticklabels(labels, rotation=20 if crowded else 0,
                           ha="right" if crowded else "center", fontsize=FONT_SIZE - 1)
        ax.set_title(f"{model} ({top_workers} workers)", fontsize=FONT_SIZE + 1)
        ax.set_xlabel("strategy", fontsize=FONT_SIZE)
        ax.grid(True, axis="y", alpha=0.3)
        ax.tick_params(axis="y", labelsize=FONT_SIZE - 1)
    links = f", links {' / '.join(sorted(links_shown))}" if links_shown else ""
    fig.suptitle(f"Network bytes per training step (1 MB = 10^6 bytes{links})", fontsize=FONT_SIZE + 2)
    fig.legend(handles.values(), handles.keys(), loc="outside lower center", fontsize=FONT_SIZE,
               ncols=len(handles))
    return _save(fig, path)


def predicted_vs_measured_plot(summary, path):
    """Cost-model predictions against measurements (step time, bytes), with y = x and ±10%."""
    ok = summary[summary["status"] == "ok"]
    panels = []
    time_points = [(r["predicted_step_time_s"], r["step_time_median_s"], r["strategy"], "o")
                   for _, r in ok.iterrows()
                   if _both(r["predicted_step_time_s"], r["step_time_median_s"])]
    if time_points:
        panels.append(("Step time", "step time", "s", time_points))
    byte_points = []
    for _, r in ok.iterrows():
        if _both(r["bytes_worker_predicted"], r["bytes_worker_measured"]):
            byte_points.append((r["bytes_worker_predicted"] / 1e6, r["bytes_worker_measured"] / 1e6,
                                r["strategy"], "o"))
        if _both(r["bytes_ps_predicted"], r["bytes_ps_measured"]):
            byte_points.append((r["bytes_ps_predicted"] / 1e6, r["bytes_ps_measured"] / 1e6,
                                r["strategy"], "s"))
    if byte_points:
        panels.append(("Bytes per step (circles: worker, squares: PS host)", "bytes/step", "MB",
                       byte_points))
    if not panels:
        return None
    fig, axes = _figure(len(panels), panel_size=(5.4, 4.6))
    handles = {}
    for ax, (title, quantity, unit, points) in zip(axes, panels):
        for predicted, measured, strategy, marker in points:
            # auto usually repeats another strategy's point: draw it hollow so both show
            hollow = strategy == "auto"
            handle = ax.scatter([predicted], [measured], marker=marker, s=80 if hollow else 55,
                                facecolors="none" if hollow else _color(strategy),
                                edgecolors=_color(strategy) if hollow else "black",
                                linewidths=1.6 if hollow else 0.5, zorder=4 if hollow else 3)
            handles.setdefault(strategy, handle)
        values = [v for p in points for v in p[:2] if v > 0]
        low, high = min(values), max(values)
        if _wide_spread(values):
            ax.set_xscale("log")
            ax.set_yscale("log")
            plain_log_labels(ax.xaxis)
            plain_log_labels(ax.yaxis)
            low, high = low / 1.5, high * 1.5
        else:
            pad = (high - low) * 0.1 or high * 0.1
            low, high = max(0.0, low - pad), high + pad
        ax.plot([low, high], [low, high], color="black", linewidth=1, label="measured = predicted")
        ax.plot([low, high], [low * 1.1, high * 1.1], color="gray", linestyle="--", linewidth=0.8)
        ax.plot([low, high], [low * 0.9, high * 0.9], color="gray", linestyle="--", linewidth=0.8)
        ax.set_xlim(low, high)
        ax.set_ylim(low, high)
        ax.set_title(title, fontsize=FONT_SIZE + 1)
        ax.set_xlabel(f"predicted {quantity} ({unit})", fontsize=FONT_SIZE)
        ax.set_ylabel(f"measured {quantity} ({unit})", fontsize=FONT_SIZE)
        ax.grid(True, alpha=0.3)
        ax.tick_params(labelsize=FONT_SIZE - 1)
    fig.suptitle("Cost model against measurement (solid: y = x, dashed: ±10%)",
                 fontsize=FONT_SIZE + 2)
    fig.legend(handles.values(), handles.keys(), loc="outside right upper", fontsize=FONT_SIZE,
               title="strategy", title_fontsize=FONT_SIZE)
    return _save(fig, path)


def plain_log_labels(axis):
    """Label log axes 20, 50, 100 rather than 2×10^1: easier to read off. Where the axis spans
    at most a factor of 5 (one or no labelled tick otherwise), every minor tick is labelled."""
    def minor(v, _):
        low, high = sorted(axis.get_view_interval())
        narrow = low > 0 and high / low <= 5
        return f"{v:g}" if narrow or f"{v:g}"[0] in "25" else ""

    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(FuncFormatter(minor))


def _both(a, b):
    return a is not None and b is not None and a == a and b == b and a > 0 and b > 0
