"""Display strings and rendering: numbers as people paste them, tables as Markdown and HTML.

Tables are plain lists of strings rendered twice (Markdown for pasting, HTML for the page).
"""
import html
from dataclasses import dataclass, field

from bench.store.results import is_missing
from ralp.hardware import format_bandwidth

DISCREPANCY_LIMIT = 0.10  # a prediction further off than this is flagged ⚠


@dataclass
class Table:
    """A titled grid of display strings, rendered to Markdown or HTML; without headers, its notes alone."""

    title: str
    headers: list
    rows: list
    notes: list = field(default_factory=list)


@dataclass
class Report:
    title: str
    intro: list
    tables: list
    plots: list = field(default_factory=list)  # (file name, caption)


def fmt_bytes(value):
    if is_missing(value):
        return "—"
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(value) >= size:
            return f"{value / size:.1f} {unit}"
    return f"{value:.0f} B"


def fmt_rate(value):
    if is_missing(value):
        return "—"
    return f"{value:,.0f}" if value >= 1000 else f"{value:,.1f}"


def fmt_seconds(value):
    if is_missing(value):
        return "—"
    return f"{value:.3g} s"


def fmt_key(key, value):
    if is_missing(value):
        return "—"
    if key in ("link_bps", "ps_link_bps"):
        return format_bandwidth(value)
    if key == "latency_s":
        return f"{value * 1e3:g} ms"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def fmt_discrepancy(measured, predicted):
    """Relative error of the prediction, flagged with ⚠ beyond DISCREPANCY_LIMIT."""
    if is_missing(measured) or is_missing(predicted) or not predicted:
        return "—"
    error = (measured - predicted) / predicted
    flag = " ⚠" if abs(error) > DISCREPANCY_LIMIT else ""
    return f"{error:+.0%}{flag}"


def one_line(text, limit=80):
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _md_cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def to_markdown(report):
    out = [f"# {report.title}", ""] + report.intro + [""]
    for table in report.tables:
        out += [f"## {table.title}", ""]
        if table.headers:  # a section of notes alone has none
            out.append("| " + " | ".join(_md_cell(h) for h in table.headers) + " |")
            out.append("|" + "|".join("---" for _ in table.headers) + "|")
            out += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in table.rows] + [""]
        out += table.notes + ([""] if table.notes else [])
    if report.plots:
        out += ["## Plots", ""] + [f"![{caption}]({name})" for name, caption in report.plots] + [""]
    return "\n".join(out)


_CSS = """body{font-family:system-ui,sans-serif;margin:2em;max-width:1400px;color:#222}
table{border-collapse:collapse;margin:.5em 0 1em}th,td{border:1px solid #ccc;padding:4px 8px;
text-align:left;vertical-align:top}th{background:#f3f3f3}td.warn{background:#fff3cd}
td.failed{background:#f8d7da}td.faster{background:#d4edda}td.slower{background:#f8d7da}
img{max-width:100%;border:1px solid #ddd;margin:.5em 0}p.note{color:#555;font-size:.9em}"""


def _cell_class(text):
    if "⚠" in text:
        return "warn"
    if text.startswith("failed"):
        return "failed"
    return text if text in ("faster", "slower") else ""


def _inline(text):
    """HTML-escape, then turn `code` spans into <code>."""
    parts = html.escape(text).split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


def to_html(report):
    body = [f"<h1>{html.escape(report.title)}</h1>"]
    body += [f"<p>{_inline(line.removeprefix('- '))}</p>" for line in report.intro]
    for table in report.tables:
        body.append(f"<h2>{html.escape(table.title)}</h2>")
        if table.headers:
            body.append("<table><thead><tr>")
            body.append("".join(f"<th>{html.escape(str(h))}</th>" for h in table.headers))
            body.append("</tr></thead><tbody>")
            for row in table.rows:
                cells = "".join(f'<td class="{_cell_class(str(c))}">{html.escape(str(c))}</td>'
                                for c in row)
                body.append(f"<tr>{cells}</tr>")
            body.append("</tbody></table>")
        body += [f'<p class="note">{_inline(n)}</p>' for n in table.notes]
    for name, caption in report.plots:
        body.append(f'<figure><img src="{html.escape(name)}" alt="{html.escape(caption)}">'
                    f"<figcaption>{html.escape(caption)}</figcaption></figure>")
    return ("<!doctype html><html><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(report.title)}</title><style>{_CSS}</style></head><body>\n"
            + "\n".join(body) + "\n</body></html>\n")
