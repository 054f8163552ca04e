"""Build the reporter of one run: a live console on a terminal, plain lines elsewhere.

Importing this module is cheap (stdlib only); rich is loaded only when a live console is built.
"""

from __future__ import annotations

from typing import TextIO

from vx.events import Reporter
from vx.report.plain import PlainReporter, Sink
from vx.style import Palette


def make_reporter(
    *,
    flow: str,
    color: bool | int,  # a depth (vx.style.color_depth), or True for truecolour
    live: bool,
    version: str,
    out: TextIO,
    err: TextIO,
    github: bool = False,
) -> Reporter:
    """Build the reporter for one run: a live console on a terminal, plain lines elsewhere.

    `flow` is focused (no selection flag), broad (`--all`) or ci (a truthy CI); `live` should
    be true only on a terminal outside CI. The result also has `close()`, which a caller
    should run in a `finally` so an interrupted run never leaves the status region drawn.
    """
    palette, sink = Palette(color), Sink(out, err)
    if not live:
        return PlainReporter(flow=flow, palette=palette, version=version, sink=sink, github=github)
    from vx.report.console import ConsoleReporter, terminal_width

    return ConsoleReporter(
        flow=flow, palette=palette, version=version, sink=sink, width=lambda: terminal_width(err)
    )
