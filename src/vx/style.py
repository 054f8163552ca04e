"""The words and colours every vx output shares: the palette, durations and the footer.

Stdlib only, and nothing that pulls `re` or the records in at import: the reporters build on
it, and so does a replayed warm run (`vx.fastpath.receipt`), which must print the very same footer
without loading the reporters at all.
"""

from __future__ import annotations

import zlib

_RGB = {
    "ok": (95, 205, 120),
    "fail": (240, 85, 85),
    "hit": (95, 170, 255),
    "warn": (230, 190, 80),
    "task": (255, 121, 198),  # the task half of an id is pink
}
_SGR = {"dim": "2", "bold": "1"}

# CSI (colours, cursor moves), OSC (titles, links) and the two-byte escapes: everything a
# terminal would swallow, so plain output carries only the text a reader would have seen.
_ANSI_PATTERN = r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])"
_ansi = None  # compiled on first use: `re` costs a replayed run more than its whole footer


def strip_ansi(text: str) -> str:
    """Drop terminal escape sequences; plain output must not carry a tool's colours."""
    global _ansi
    if _ansi is None:
        import re

        _ansi = re.compile(_ANSI_PATTERN)
    return _ansi.sub("", text)


def color_enabled(env, stream: object) -> bool:
    """Decide colour: NO_COLOR, then FORCE_COLOR, then whether it is a terminal."""
    if env.get("NO_COLOR"):
        return False
    force = env.get("FORCE_COLOR")
    if force is not None:
        return force.strip().lower() not in ("0", "false")
    try:
        return bool(stream.isatty())  # type: ignore[attr-defined]
    except (AttributeError, ValueError, OSError):  # no isatty, or already closed
        return False


class Palette:
    """Paint text in truecolour, or leave it alone when colour is off."""

    def __init__(self, color: bool) -> None:
        self.color = color

    def paint(self, text: str, style: str) -> str:
        """Wrap `text` in the style's SGR codes; the reset keeps styles from leaking."""
        if not self.color or not text:
            return text
        return f"\x1b[{_sgr(style)}m{text}\x1b[0m"

    def task_id(self, tid) -> str:
        """Colour the project by a stable hue and the task half pink."""
        if not self.color:
            return str(tid)
        project = f"\x1b[38;2;{';'.join(map(str, project_rgb(tid.package)))}m{tid.package}\x1b[0m"
        return f"{project}#{self.paint(tid.task, 'task')}"

    def content(self, line: str) -> str:
        """Pass a task's own line through, stripped of escapes when vx prints plain."""
        return line if self.color else strip_ansi(line)


def _sgr(style: str) -> str:
    if style in _SGR:
        return _SGR[style]
    r, g, b = _RGB[style]
    return f"38;2;{r};{g};{b}"


def project_rgb(name: str) -> tuple[int, int, int]:
    """Derive a hue from the name, so a project keeps its colour from run to run."""
    hue = zlib.crc32(name.encode()) % 360
    return _hsl_to_rgb(hue, 0.6, 0.68)


def _hsl_to_rgb(hue: float, sat: float, light: float) -> tuple[int, int, int]:
    chroma = (1 - abs(2 * light - 1)) * sat
    x = chroma * (1 - abs((hue / 60) % 2 - 1))
    m = light - chroma / 2
    sector = int(hue // 60) % 6
    r, g, b = [
        (chroma, x, 0),
        (x, chroma, 0),
        (0, chroma, x),
        (0, x, chroma),
        (x, 0, chroma),
        (chroma, 0, x),
    ][sector]
    return (round((r + m) * 255), round((g + m) * 255), round((b + m) * 255))


def format_duration(ms: float) -> str:
    """Spell a duration `0.41s`, `12.34s`, `1m02s`, `1h05m`: decimals while seconds matter."""
    seconds = max(ms, 0.0) / 1000
    if seconds < 60:
        return f"{seconds:.2f}s"
    if seconds < 3600:
        return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"
    return f"{int(seconds // 3600)}h{int(seconds % 3600 // 60):02d}m"


def write(stream, text: str) -> None:
    """Write text; a terminal that cannot encode it still gets it, box glyphs replaced."""
    try:
        stream.write(text)
    except UnicodeEncodeError:
        encoding = getattr(stream, "encoding", None) or "ascii"
        stream.write(text.encode(encoding, "replace").decode(encoding))


# The footer's tallies after `cached`, in order, with their styles.
TALLIES = (("failed", "fail"), ("skipped", "dim"), ("aborted", "warn"))


def footer(
    tasks: int, cached: int, tallies: dict[str, int], wall_ms: float, version: str, palette: Palette
) -> list[str]:
    """Build the footer: a `─ vx <ver> ─` rule as wide as the result row under it.

    The row counts `12 tasks · 10 cached (83%) · 2 failed · wall 0.41s`."""
    parts = [(f"{tasks} {'task' if tasks == 1 else 'tasks'}", "bold")]
    if tasks:
        parts.append((f"{cached} cached ({cached * 100 // tasks}%)", "hit" if cached else "dim"))
    for name, style in TALLIES:
        if tallies.get(name):
            parts.append((f"{tallies[name]} {name}", style))
    parts.append((f"wall {format_duration(wall_ms)}", "dim"))
    sep = " · "
    plain = sep.join(p for p, _ in parts)
    painted = palette.paint(sep, "dim").join(palette.paint(p, s) for p, s in parts)
    head = f"─ vx {version} "
    rule = head + "─" * max(len(plain) - len(head), 2)
    return [palette.paint(rule, "dim"), painted]
