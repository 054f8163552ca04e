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


def overprint(line: str) -> str:
    """The line a terminal shows for `line`: each carriage return starts over from column 1,
    writing over what came before (`50%\r100%` is `100%`, a closing `\r` changes nothing)."""
    if "\r" not in line:
        return line
    shown = ""
    for part in line.split("\r"):
        shown = part + shown[len(part) :]
    return shown


# Colour depths: none, the 16 ANSI colours, xterm's 256, and 24-bit (truecolour).
MONO, BASIC, EXTENDED, TRUECOLOR = 0, 16, 256, 1 << 24
_TRUECOLOR_PROGRAMS = ("iTerm.app", "WezTerm", "vscode", "ghostty", "Hyper")
_FORCED = {"1": BASIC, "2": EXTENDED, "3": TRUECOLOR}  # FORCE_COLOR's levels (supports-color's)


def color_enabled(env, stream: object) -> bool:
    """Decide colour: NO_COLOR, then FORCE_COLOR, then whether it is a terminal."""
    return color_depth(env, stream) != MONO


def color_depth(env, stream: object) -> int:
    """How many colours vx paints with: none under NO_COLOR, FORCE_COLOR=0 or off a terminal
    (unless FORCE_COLOR); then what the terminal says it shows — COLORTERM=truecolor (or 24bit),
    a terminal program known for it, TERM=*-256color, else the 16 ANSI colours (none for
    TERM=dumb). FORCE_COLOR=2 or 3 asks for at least 256 colours or truecolour."""
    if env.get("NO_COLOR"):
        return MONO
    force = env.get("FORCE_COLOR")
    forced = force is not None
    if forced and force.strip().lower() in ("0", "false"):
        return MONO
    if not forced:
        try:
            if not stream.isatty():  # type: ignore[attr-defined]
                return MONO
        except (AttributeError, ValueError, OSError):  # no isatty, or already closed
            return MONO
    term = (env.get("TERM") or "").lower()
    if term == "dumb" and not forced:
        return MONO
    found = BASIC
    if (env.get("COLORTERM") or "").lower() in ("truecolor", "24bit") or term.endswith(
        ("-direct", "-truecolor")
    ):
        found = TRUECOLOR
    elif env.get("TERM_PROGRAM") in _TRUECOLOR_PROGRAMS or env.get("GITHUB_ACTIONS") == "true":
        found = TRUECOLOR
    elif "256" in term or env.get("TERM_PROGRAM") == "Apple_Terminal":
        found = EXTENDED
    return max(found, _FORCED.get((force or "").strip(), MONO))


class Palette:
    """Paint text in as many colours as the terminal shows (`color_depth`; True is
    truecolour), or leave it alone when colour is off."""

    def __init__(self, color: bool | int) -> None:
        self.depth = (TRUECOLOR if color else MONO) if isinstance(color, bool) else color
        self.color = self.depth != MONO

    def paint(self, text: str, style: str) -> str:
        """Wrap `text` in the style's SGR codes; the reset keeps styles from leaking."""
        if not self.color or not text:
            return text
        return f"\x1b[{_sgr(style, self.depth)}m{text}\x1b[0m"

    def task_id(self, tid) -> str:
        """Colour the project by a stable hue and the task half pink."""
        if not self.color:
            return str(tid)
        colour = foreground(project_rgb(tid.package), self.depth)
        return f"\x1b[{colour}m{tid.package}\x1b[0m#{self.paint(tid.task, 'task')}"

    def content(self, line: str) -> str:
        """Pass a task's own line through; when vx prints plain, stripped of escapes and with
        what a carriage return overwrote gone (a progress bar's last state)."""
        return line if self.color else overprint(strip_ansi(line))


def _sgr(style: str, depth: int = TRUECOLOR) -> str:
    if style in _SGR:
        return _SGR[style]
    return foreground(_RGB[style], depth)


def foreground(rgb: tuple[int, int, int], depth: int) -> str:
    """The SGR parameters of a foreground colour at `depth`: itself in truecolour, else the
    nearest of xterm's 256 or of the 16 ANSI colours."""
    r, g, b = rgb
    if depth >= TRUECOLOR:
        return f"38;2;{r};{g};{b}"
    if depth >= EXTENDED:
        return f"38;5;{_nearest_256(rgb)}"
    return _nearest_16(rgb)


# the ANSI colour of each 60° of hue from red: red, yellow, green, cyan, blue, magenta
_HUES = (1, 3, 2, 6, 4, 5)


def _nearest_16(rgb: tuple[int, int, int]) -> str:
    """The ANSI colour of the same hue (its bright form for a light colour), or a grey: by hue,
    not by distance, which would turn every pastel of the palette into white."""
    high, low = max(rgb), min(rgb)
    bright = (high + low) / 2 > 140
    if high - low < 40:  # no hue to speak of
        return "97" if high > 200 else "37" if high > 150 else "90" if high > 64 else "30"
    r, g, b = rgb
    if high == r:
        hue = ((g - b) / (high - low)) % 6
    elif high == g:
        hue = (b - r) / (high - low) + 2
    else:
        hue = (r - g) / (high - low) + 4
    colour = _HUES[round(hue) % 6]
    return str((90 if bright else 30) + colour)


_CUBE = (0, 95, 135, 175, 215, 255)


def _nearest_256(rgb: tuple[int, int, int]) -> int:
    """The closest entry of the 6×6×6 cube (16–231) or the grey ramp (232–255)."""
    steps = [min(range(6), key=lambda i: abs(_CUBE[i] - c)) for c in rgb]
    cube = tuple(_CUBE[i] for i in steps)
    grey_step = min(23, max(0, round((sum(rgb) / 3 - 8) / 10)))
    grey = (8 + 10 * grey_step,) * 3
    if _distance(rgb, grey) < _distance(rgb, cube):
        return 232 + grey_step
    return 16 + 36 * steps[0] + 6 * steps[1] + steps[2]


def _distance(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    return sum((x - y) ** 2 for x, y in zip(a, b))


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


# The footer's tallies after `cached`, in order, with their styles: a stopped run's tasks are
# those it stopped mid-run and those it never started, told apart (`2 stopped · 4 not started`).
TALLIES = (("failed", "fail"), ("skipped", "dim"), ("stopped", "warn"), ("not started", "dim"))


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
