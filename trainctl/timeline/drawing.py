"""Draw a ``Timeline`` with matplotlib: an SVG, a PNG, a PDF, or a small standalone HTML page around an SVG.

The file's extension names its format (``FORMATS``); an extension that names none is refused
before anything is drawn, so ``-o timeline.jpg`` never writes an SVG under a JPEG's name.

Three panels share the time axis (seconds since the job started): the job's conditions,
one bar row per pod (phases as coloured spans, restarts and other marks on them, the node
in the row label, rows grouped by replica type), and the world size as a step line. The
figure grows with the number of rows so 3 pods and 100 pods are both readable.

Every drawn element carries an SVG id (``row:POD``, ``span:POD:PHASE``, ``mark:POD:KIND``,
``condition:TYPE``, ``world-size``), so a reader or a test can find it in the file.
"""

from __future__ import annotations

import html
import io
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from trainctl.timeline import model

PHASE_COLOURS = {
    model.PENDING: "#f2c94c",
    model.NODE_CHECK: "#56ccf2",
    model.RUNNING: "#2f80ed",
    model.WAITING: "#f2994a",
    model.TERMINATING: "#9b51e0",
    model.SUCCEEDED: "#27ae60",
    model.FAILED: "#eb5757",
    model.UNKNOWN: "#bdbdbd",
}
CONDITION_COLOURS = {
    "Created": "#828282",
    "Running": "#2f80ed",
    "Restarting": "#f2994a",
    "Succeeded": "#27ae60",
    "Failed": "#eb5757",
    "Suspended": "#9b51e0",
}
MARK_STYLES = {  # kind -> (marker, colour)
    "restart": ("X", "#c0392b"),
    "recreated": ("D", "#8e44ad"),
    "deleted": ("v", "#333333"),
    "event": ("*", "#d35400"),
}
# The job's own Warning Events go on a lane under its conditions.
EVENTS_LANE = "events"
# Beyond this many rows, marks keep their symbol but lose their text, which would overlap.
MAX_ANNOTATED_ROWS = 40
ROW_INCHES = 0.3
LANE_INCHES = 0.25
WIDTH_INCHES = 13.0


# A file's extension -> the format written (the formats matplotlib draws, and a page around an SVG).
FORMATS = {".svg": "svg", ".html": "html", ".htm": "html", ".png": "png", ".pdf": "pdf"}
PNG_DPI = 120


class UnknownFormat(ValueError):
    """A file name whose extension names no format a timeline is written in."""


def format_of(path: str | Path) -> str:
    """The format ``path``'s extension names: "svg", "html", "png" or "pdf"; raises ``UnknownFormat``."""
    suffix = Path(path).suffix.lower()
    if suffix in FORMATS:
        return FORMATS[suffix]
    why = f"{suffix} is not a format a timeline is written in" if suffix else "no extension to tell the format"
    raise UnknownFormat(f"cannot write a timeline to {path}: {why}; use {', '.join(FORMATS)}")


def render_svg(timeline: model.Timeline) -> str:
    """The timeline as an SVG document (text kept as text, so it is searchable)."""
    import matplotlib

    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "trainctl-timeline"}):
        buffer = io.StringIO()
        figure(timeline).savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    return buffer.getvalue()


def render_image(timeline: model.Timeline, image_format: str) -> bytes:
    """The timeline as a PNG or PDF file's bytes."""
    buffer = io.BytesIO()
    metadata = {"CreationDate": None} if image_format == "pdf" else {}
    figure(timeline).savefig(buffer, format=image_format, bbox_inches="tight", dpi=PNG_DPI, metadata=metadata)
    return buffer.getvalue()


def render_html(timeline: model.Timeline) -> str:
    """A standalone page: a title, the SVG, and a legend of the colours and marks."""
    svg = render_svg(timeline)
    svg = svg[svg.index("<svg") :]  # drop the XML prolog and doctype inside HTML
    phases = "".join(
        f'<li><span class="swatch" style="background:{colour}"></span>{html.escape(phase)}</li>' for phase, colour in PHASE_COLOURS.items()
    )
    marks = "".join(f'<li><span style="color:{colour}">{_MARK_GLYPHS[kind]}</span> {html.escape(kind)}</li>' for kind, (_, colour) in MARK_STYLES.items())
    title = html.escape(f"Timeline of {timeline.title}")
    started = html.escape(_utc(timeline.start))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: sans-serif; margin: 1.5em; }}
ul.legend {{ list-style: none; padding: 0; display: flex; flex-wrap: wrap; gap: 1.2em; }}
.swatch {{ display: inline-block; width: 1em; height: 1em; margin-right: .4em; vertical-align: middle; }}
svg {{ max-width: 100%; height: auto; }}
</style></head>
<body>
<h1>{title}</h1>
<p>Started {started}; {len(timeline.rows)} pod(s); time axis in seconds since the start.</p>
<h2>Legend</h2>
<ul class="legend">{phases}</ul>
<ul class="legend">{marks}</ul>
{svg}
</body></html>
"""


def write(timeline: model.Timeline, path: str | Path) -> Path:
    """Write ``path`` in the format its extension names (``format_of``)."""
    path = Path(path)
    written = format_of(path)
    if written in ("png", "pdf"):
        path.write_bytes(render_image(timeline, written))
    else:
        path.write_text(render_html(timeline) if written == "html" else render_svg(timeline), encoding="utf-8")
    return path


_MARK_GLYPHS = {"restart": "✖", "recreated": "◆", "deleted": "▼", "event": "★"}


def _utc(at: float) -> str:
    return datetime.fromtimestamp(at, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def figure(timeline: model.Timeline) -> Any:
    """The matplotlib Figure (no pyplot, so no GUI backend and no global state)."""
    from matplotlib.artist import Artist
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    rows = timeline.rows
    spans = timeline.condition_spans()
    condition_types = list(dict.fromkeys(type_ for type_, _ in spans))
    if timeline.job_marks:
        condition_types.append(EVENTS_LANE)
    condition_types = condition_types or ["(none)"]
    has_world = bool(timeline.world_size)
    heights = [LANE_INCHES * len(condition_types) + 0.2, ROW_INCHES * max(len(rows), 1) + 0.3]
    if has_world:
        heights.append(1.2)
    fig = Figure(figsize=(WIDTH_INCHES, sum(heights) + 1.3), layout="constrained")
    axes = fig.subplots(len(heights), 1, sharex=True, gridspec_kw={"height_ratios": heights})
    cond_ax, pods_ax = axes[0], axes[1]
    origin = timeline.start
    _conditions(cond_ax, timeline, spans, condition_types, origin)
    _pods(pods_ax, timeline, origin)
    if has_world:
        _world_size(axes[2], timeline, origin)
    last = axes[-1]
    last.set_xlabel(f"seconds since {_utc(origin)}")
    last.set_xlim(0, max(timeline.end - origin, 1.0) * 1.02)
    fig.suptitle(f"{timeline.title}: {len(rows)} pod(s)", fontsize=12, x=0.02, ha="left")
    used = sorted({s.phase for r in rows for s in r.spans}, key=list(PHASE_COLOURS).index)
    handles: list[Artist] = [Patch(facecolor=PHASE_COLOURS[p], label=p) for p in used]
    used_marks = sorted({m.kind for r in rows for m in r.marks})
    handles += [
        Line2D([], [], linestyle="", marker=MARK_STYLES[k][0], color=MARK_STYLES[k][1], label=k) for k in used_marks
    ]
    if handles:
        fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 10), fontsize=8, frameon=False)
    return fig


def _conditions(ax: Any, timeline: model.Timeline, spans: list[tuple[str, model.Span]], types: Sequence[str], origin: float) -> None:
    lane = {type_: i for i, type_ in enumerate(types)}
    for type_, span in spans:
        bar = ax.broken_barh(
            [(span.start - origin, max(span.end - span.start, 0.01))], (lane[type_] - 0.35, 0.7),
            facecolors=CONDITION_COLOURS.get(type_, "#555555"), alpha=0.85,
        )
        bar.set_gid(f"condition:{type_}")
    for mark in timeline.job_marks:
        point = ax.plot([mark.at - origin], [lane[EVENTS_LANE]], marker="*", color=MARK_STYLES["event"][1], markersize=8, linestyle="")[0]
        point.set_gid(f"job-mark:{mark.reason}")
        if len(timeline.job_marks) <= MAX_ANNOTATED_ROWS:
            ax.annotate(mark.reason, (mark.at - origin, lane[EVENTS_LANE]), xytext=(5, 0), textcoords="offset points", fontsize=7, va="center")
    ax.set_yticks(range(len(types)), labels=list(types), fontsize=8)
    ax.set_ylim(len(types) - 0.5, -0.5)
    ax.set_ylabel("job", fontsize=9)
    ax.grid(axis="x", alpha=0.3)


def _pods(ax: Any, timeline: model.Timeline, origin: float) -> None:
    rows = timeline.rows
    font = 8 if len(rows) <= 30 else 6
    annotate = len(rows) <= MAX_ANNOTATED_ROWS
    for y, row in enumerate(rows):
        for phase in dict.fromkeys(s.phase for s in row.spans):
            bars = [(s.start - origin, max(s.end - s.start, 0.01)) for s in row.spans if s.phase == phase]
            collection = ax.broken_barh(bars, (y - 0.38, 0.76), facecolors=PHASE_COLOURS.get(phase, "#999999"))
            collection.set_gid(f"span:{row.pod}:{phase}")
        for i, mark in enumerate(row.marks):
            marker, colour = MARK_STYLES.get(mark.kind, MARK_STYLES["event"])
            point = ax.plot([mark.at - origin], [y], marker=marker, color=colour, markersize=7 if annotate else 4, linestyle="")[0]
            point.set_gid(f"mark:{row.pod}:{mark.kind}:{i}")
            if annotate:
                ax.annotate(
                    mark.reason, (mark.at - origin, y), xytext=(5, 0), textcoords="offset points", fontsize=font - 1, va="center",
                    color=colour, bbox={"boxstyle": "round,pad=0.1", "facecolor": "white", "alpha": 0.75, "linewidth": 0},
                )
        anchor = ax.plot([], [])[0]  # an empty artist that names the row in the SVG
        anchor.set_gid(f"row:{row.pod}")
    labels = [row.label + (f"  ↻{row.restarts}" if row.restarts else "") for row in rows]
    ax.set_yticks(range(len(rows)), labels=labels, fontsize=font)
    ax.set_ylim(max(len(rows), 1) - 0.5, -0.5)
    # One thin line between replica types, and the type's name and size at the right edge.
    groups: dict[str, list[int]] = {}
    for y, row in enumerate(rows):
        groups.setdefault(row.replica_type or "other", []).append(y)
    if len(groups) > 1:
        for type_, ys in groups.items():
            if ys[0] > 0:
                ax.axhline(ys[0] - 0.5, color="#555555", linewidth=0.8)
            ax.text(1.005, ys[0] - 0.4, f"{type_} ×{len(ys)}", transform=ax.get_yaxis_transform(), fontsize=8, va="top")
    for change in timeline.conditions:
        if change.status == "True":
            ax.axvline(change.at - origin, color=CONDITION_COLOURS.get(change.type, "#555555"), linestyle=":", linewidth=0.8)
    ax.set_ylabel("pods", fontsize=9)
    ax.grid(axis="x", alpha=0.3)


def _world_size(ax: Any, timeline: model.Timeline, origin: float) -> None:
    points = timeline.world_size
    xs = [p.at - origin for p in points] + [timeline.end - origin]
    ys = [p.size for p in points] + [points[-1].size]
    line = ax.step(xs, ys, where="post", color="#2d3436")[0]
    line.set_gid("world-size")
    for point in points:
        ax.annotate(str(point.size), (point.at - origin, point.size), xytext=(2, 3), textcoords="offset points", fontsize=8)
    top = max(ys)
    ax.set_ylim(0, top + 1)
    ax.set_yticks(sorted({0, *ys}))
    ax.set_ylabel("WORLD_SIZE", fontsize=9)
    ax.grid(alpha=0.3)
