"""Render a run for people and for scripts: live console, plain lines, JSON summary, `--dry`.

Reporters subscribe to events and never call back into the core. Importing this package is
cheap (stdlib only); rich is loaded only when a live console is built for a terminal.
"""

from __future__ import annotations

from typing import TextIO

from vx.events import Reporter
from vx.report.dry import graph_dot, graph_target, render_dry
from vx.report.plain import FLOWS, OUTPUT_LOGS, VISIBILITY, PlainReporter, Sink
from vx.report.summary import append_report, markdown, summary_dict, write_summary
from vx.style import Palette, color_enabled

__all__ = [
    "FLOWS",
    "OUTPUT_LOGS",
    "VISIBILITY",
    "color_enabled",
    "make_reporter",
    "graph_dot",
    "graph_target",
    "render_dry",
    "append_report",
    "markdown",
    "summary_dict",
    "write_summary",
]


def make_reporter(*, flow: str, color: bool, live: bool, version: str, out: TextIO, err: TextIO,
                  github: bool = False) -> Reporter:
    """Build the reporter for one run: a live console on a terminal, plain lines elsewhere.

    `flow` is focused (no selection flag), broad (`--all`) or ci (a truthy CI); `live` should
    be true only on a terminal outside CI. The result also has `close()`, which a caller
    should run in a `finally` so an interrupted run never leaves the status region drawn.
    """
    palette, sink = Palette(color), Sink(out, err)
    if not live:
        return PlainReporter(flow=flow, palette=palette, version=version, sink=sink, github=github)
    from vx.report.console import ConsoleReporter, terminal_width

    return ConsoleReporter(flow=flow, palette=palette, version=version, sink=sink, width=lambda: terminal_width(err))
