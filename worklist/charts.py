"""The recall-at-a-glance charts as server-side SVG, drawn by leather (MIT; ADR 0015): no JavaScript, nothing
fetched, text kept as text. Each chart is readable without colour: a funnel bar carries its stage and count as
its label and a hatch of its own, a timeline line its own dash (shown in the legend), the Class I deadline a
labelled rule. The same numbers stand in a table beside each chart (templates/worklist/_glance.html).

    funnel_svg(stages, *, title, chart_id) -> SafeString
    timeline_svg(timeline, *, title, chart_id, deadline_day=None) -> SafeString
"""

import xml.etree.ElementTree as ET
from datetime import datetime, time, timedelta

import leather
from django.utils.safestring import mark_safe

# leather styles through module-level theme values. Set once, here, for every chart of the process: readable
# system fonts, text dark enough for WCAG AA contrast on a white ground (its defaults are light grey on grey).
_TEXT = "#1d2330"
for _name, _value in {"background_color": "#ffffff", "title_color": _TEXT, "legend_color": _TEXT,
                      "axis_title_color": _TEXT, "label_color": "#3a4250", "tick_color": "#dde1e8",
                      "zero_color": "#5b6472", "title_font_family": "system-ui, sans-serif",
                      "legend_font_family": "system-ui, sans-serif", "tick_font_family": "system-ui, sans-serif",
                      "axis_title_font_family": "system-ui, sans-serif", "tick_font_size": 13,
                      "tick_font_char_width": 7, "legend_font_size": 13, "legend_font_char_width": 7,
                      "margin": 0.02}.items():
    setattr(leather.theme, _name, _value)

# Colour-blind-safe hues (Okabe-Ito); every series also has a hatch or a dash, so colour is never the only cue.
HUES = ["#0072b2", "#d55e00", "#009e73", "#cc79a7", "#56b4e9", "#e69f00", "#000000", "#7a5195"]
HATCHES = ["", "M0,8 L8,0", "M0,0 L8,8", "M4,0 L4,8", "M0,4 L8,4", "M0,8 L8,0 M0,0 L8,8", "M0,4 L8,4 M4,0 L4,8",
           "M0,6 L8,6 M0,2 L8,2"]
DASHES = ["none", "8 4", "2 3", "12 3 2 3"]
DEADLINE_DASH = "4 2"


def _patterns(chart_id: str, count: int) -> ET.Element:
    defs = ET.Element("defs")
    for i in range(count):
        pattern = ET.SubElement(defs, "pattern", id=f"{chart_id}-p{i}", width="8", height="8",
                                patternUnits="userSpaceOnUse")
        ET.SubElement(pattern, "rect", width="8", height="8", fill=HUES[i % len(HUES)])
        if HATCHES[i % len(HATCHES)]:
            ET.SubElement(pattern, "path", d=HATCHES[i % len(HATCHES)], stroke="#ffffff")
            pattern[-1].set("stroke-width", "1.5")
    return defs


def _document(chart, *, chart_id: str, title: str, width: int, height: int, defs=None) -> str:
    """The chart as an <svg role="img"> named by its <title>, so a screen reader announces it once and moves on
    to the table beside it, which holds the numbers."""
    root = ET.Element("svg", xmlns="http://www.w3.org/2000/svg", viewBox=f"0 0 {width} {height}", role="img",
                      id=chart_id, width="100%", preserveAspectRatio="xMinYMin meet")
    root.set("aria-labelledby", f"{chart_id}-title")
    root.set("class", "glance-chart")
    ET.SubElement(root, "title", id=f"{chart_id}-title").text = title
    if defs is not None:
        root.append(defs)
    root.append(chart.to_svg_group(width, height))
    return ET.tostring(root, encoding="unicode")


def funnel_svg(stages, *, title: str, chart_id: str, width: int = 720) -> str:
    """Horizontal bars, first stage on top; each bar's axis label is its stage and its count."""
    chart = leather.Chart()
    labels = [f"{stage.label}: {stage.count}" for stage in stages]
    fills = {label: f"url(#{chart_id}-p{i})" for i, label in enumerate(labels)}
    chart.add_x_scale(0, max([1, *(stage.count for stage in stages)]))
    chart.add_x_axis(tick_formatter=lambda value, i, count: f"{value:g}")
    chart.add_bars([(stage.count, label) for stage, label in zip(stages, labels, strict=True)],
                   fill_color=lambda d: fills[d.y])
    height = 40 + 30 * len(stages)
    return mark_safe(_document(chart, chart_id=chart_id, title=title, width=width, height=height,  # noqa: S308
                               defs=_patterns(chart_id, len(stages))))


class _DashedLine(leather.Line):
    """A line whose legend entry is a sample of its own dash, not only a colour swatch."""

    def legend_to_svg(self, series, palette):
        items = super().legend_to_svg(series, palette)
        for group, _width in items:
            swatch = group.find("rect")
            if swatch is not None:
                group.remove(swatch)
            sample = ET.Element("line", x1="0", x2="14", y1="-5", y2="-5", stroke=self._stroke_color)
            sample.set("stroke-width", "3")
            if self._stroke_dasharray != "none":
                sample.set("stroke-dasharray", self._stroke_dasharray)
            group.insert(0, sample)
        return items


class _Dots(leather.Dots):
    """The days a line changed, marked; the line's own legend entry names them."""

    def legend_to_svg(self, series, palette):
        return []


class _Rule(_DashedLine):
    """The Class I deadline: a vertical dashed rule with its name written beside it."""

    def __init__(self, label: str):
        super().__init__("#8a1f1f", 2, DEADLINE_DASH)
        self.label = label

    def to_svg(self, width, height, x_scale, y_scale, series, palette):
        group = super().to_svg(width, height, x_scale, y_scale, series, palette)
        first = next(iter(series.data()))
        # Written to the left of the rule: the rule sits near the right edge when the deadline is the last day.
        text = ET.SubElement(group, "text", x=str(x_scale.project(first.x, 0, width) - 4), y="12", fill="#8a1f1f")
        text.set("text-anchor", "end")
        text.set("font-size", "13")
        text.set("font-family", leather.theme.tick_font_family)
        text.text = self.label
        return group


def _midnight(day) -> datetime:
    return datetime.combine(day, time())


def timeline_svg(timeline, *, title: str, chart_id: str, deadline_day=None, today=None, width: int = 720,
                 height: int = 300) -> str:
    """Each series' running total by day, as a dashed step line with dots on the days something happened; the
    Class I deadline as a labelled rule. Lines run on, flat, to `today` (where we stand now), never past it.
    An empty timeline draws nothing (its table says so)."""
    # Days as midnights: leather's time ticks for a span of hours (a recall a day or two old) need datetimes.
    days = [_midnight(day) for day, _so_far in timeline.days]
    deadline = _midnight(deadline_day) if deadline_day else None
    if not days:
        return ""
    now = _midnight(today) if today and _midnight(today) > days[-1] else None
    edges = days + ([deadline] if deadline else []) + ([now] if now else [])
    first, last = min(edges) - timedelta(days=1), max(edges) + timedelta(days=1)
    top = max([1, *(so_far[key] for _day, so_far in timeline.days for key, _label in timeline.series)])
    chart = leather.Chart()
    chart.add_x_scale(first, last)
    chart.add_y_scale(0, top)
    # Month-day reads best for a recall's weeks; a span of years (units received long before) needs the year.
    tick_format = "%m-%d" if (last - first).days <= 180 else "%Y-%m-%d"
    chart.add_x_axis(tick_formatter=lambda value, i, count: value.strftime(tick_format))
    chart.add_y_axis(tick_formatter=lambda value, i, count: f"{value:g}")
    for i, (key, label) in enumerate(timeline.series):
        # A step per day, flat from the day before the first one: a running total jumps on the day it changed.
        points, previous = [(first, 0)], 0
        for day, so_far in timeline.days:
            points += [(_midnight(day), previous), (_midnight(day), so_far[key])]
            previous = so_far[key]
        if now:
            points.append((now, previous))
        chart.add_series(leather.Series(points, name=f"{label} ({timeline.totals[key]})"),
                         _DashedLine(HUES[i], 2.5, DASHES[i % len(DASHES)]))
        chart.add_series(leather.Series([(_midnight(day), so_far[key]) for day, so_far in timeline.days]),
                         _Dots(HUES[i], 3.5))
    if deadline:
        chart.add_series(leather.Series([(deadline, 0), (deadline, top)], name="Class I deadline"),
                         _Rule(f"Class I deadline {deadline_day:%m-%d}"))
    return mark_safe(_document(chart, chart_id=chart_id, title=title, width=width, height=height))  # noqa: S308
