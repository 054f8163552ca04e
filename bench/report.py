"""Render benchmark results as Markdown: the side-by-side table and vx's stage breakdown."""

from __future__ import annotations

import statistics
from typing import Iterable, Mapping, Sequence

# Issue 4's targets: the vx/turbo ratio of median wall time, per scenario (None: no target).
TARGETS = {"warm": 0.5, "restore": 0.5, "leaf": 0.7, "core": 0.7, "cold": 0.5, "multi": None}
TARGET_SIZES = {"warm": (100, 1000), "restore": (100, 1000)}  # where the issue sets the target


def seconds(x: float) -> str:
    return f"{x * 1000:.0f} ms" if x < 1 else f"{x:.2f} s"


def spread(s: Mapping) -> str:
    if s["n"] == 1:
        return f"{seconds(s['median'])} (n=1)"
    return f"{seconds(s['median'])} ({seconds(s['low'])}–{seconds(s['high'])})"


def verdict(scenario: str, size: int, ratio: float) -> str:
    target = TARGETS.get(scenario)
    sizes = TARGET_SIZES.get(scenario)
    if target is None or (sizes and size not in sizes):
        return ""
    return f"≤ {target} {'met' if ratio <= target else '**missed**'}"


def main_table(results: Iterable[Mapping]) -> list[str]:
    rows = [
        "| size | scenario | vx wall | turbo wall | **vx/turbo** | target | vx CPU | turbo CPU | CPU ratio "
        "| vx RSS | turbo RSS |",
        "| ---: | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        vx, tb = r["tools"]["vx"], r["tools"]["turbo"]
        ratio = vx["wall_s"]["median"] / tb["wall_s"]["median"]
        cpu_ratio = vx["cpu_s"]["median"] / tb["cpu_s"]["median"]
        rows.append(
            f"| {r['size']} | {r['scenario']} | {spread(vx['wall_s'])} | {spread(tb['wall_s'])} | **{ratio:.2f}** "
            f"| {verdict(r['scenario'], r['size'], ratio)} | {seconds(vx['cpu_s']['median'])} "
            f"| {seconds(tb['cpu_s']['median'])} | {cpu_ratio:.2f} | {vx['rss_mib']['median']:.0f} MiB "
            f"| {tb['rss_mib']['median']:.0f} MiB |"
        )
    return rows


def versus_table(results: Iterable[Mapping], others: Sequence[str]) -> list[str]:
    """vx beside each of `others` (Nx with its daemon off and on): wall, the ratio, and CPU."""
    head = (
        "| size | scenario | vx wall | "
        + " | ".join(f"{o} wall | **vx/{o}**" for o in others)
        + " | vx CPU | "
        + " | ".join(f"{o} CPU" for o in others)
        + " |"
    )
    rows = [
        head,
        "| ---: | --- | ---: |" + " ---: | ---: |" * len(others) + " ---: |" * (1 + len(others)),
    ]
    for r in results:
        vx = r["tools"]["vx"]
        cells = [
            f"{spread(r['tools'][o]['wall_s'])} | "
            f"**{vx['wall_s']['median'] / r['tools'][o]['wall_s']['median']:.2f}**"
            for o in others
        ]
        cpus = [seconds(r["tools"][o]["cpu_s"]["median"]) for o in others]
        rows.append(
            f"| {r['size']} | {r['scenario']} | {spread(vx['wall_s'])} | {' | '.join(cells)} "
            f"| {seconds(vx['cpu_s']['median'])} | {' | '.join(cpus)} |"
        )
    return rows


def stage_table(results: Iterable[Mapping]) -> list[str]:
    """vx's VX_TIMING stages, median over the timed runs, one column per (size, scenario)."""
    results = [r for r in results if r.get("stages")]
    if not results:
        return []
    names: list[str] = []
    for r in results:
        names += [n for n in r["stages"] if n not in names]
    head = (
        "| stage (ms, median) | "
        + " | ".join(f"{r['size']} {r['scenario']}" for r in results)
        + " |"
    )
    rows = [head, "| --- |" + " ---: |" * len(results)]
    for name in names:
        cells = [_ms(r["stages"].get(name)) for r in results]
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    return rows


def _ms(values) -> str:
    return f"{statistics.median(values):.0f}" if values else ""


def parse_stages(stderr: str) -> dict[str, float]:
    """The `vx timing (ms)` table from VX_TIMING=1 stderr: {stage: ms}."""
    out: dict[str, float] = {}
    lines = stderr.splitlines()
    if "vx timing (ms)" not in lines:
        return out
    for line in lines[lines.index("vx timing (ms)") + 1 :]:
        if not line.startswith("  "):
            break
        name, _, value = line.strip().rpartition(" ")
        name = name.strip()
        if " (Σ" in name:  # `save (Σ 12)`: a sum over tasks, whose count varies by scenario
            name = name[: name.index(" (Σ")] + " (Σ tasks)"
        try:
            out[name] = float(value)
        except ValueError:
            break
    return out
