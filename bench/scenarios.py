"""The six scenarios of issue 4: what each run does to the workspace first, and what it must leave.

Every tool sees the same preparation in its own copy of the workspace. Edits append a line
that is unique per run (`module.exports.touch = <ns>;`), so every edited run is a real miss.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from tools import Tool, meta


@dataclass(frozen=True)
class Scenario:
    name: str
    tasks: tuple[str, ...]
    warmup: int  # untimed runs per tool before timing (they also put the state in place)
    what: str

    def prepare(self, tool: Tool, ws: Path) -> None:
        """Bring the workspace into the scenario's starting state for one run."""
        if self.name == "cold":
            tool.clean(ws)
        elif self.name == "restore":
            for pkg in (ws / "packages").iterdir():
                shutil.rmtree(pkg / "dist", ignore_errors=True)
        elif self.name in ("leaf", "core"):
            with open(ws / self.edited(ws), "a") as f:
                f.write(f"module.exports.touch = {time.time_ns()};\n")

    def check(self, ws: Path) -> None:
        """Refuse a run that did not leave every package built (a restore must really restore)."""
        missing = [
            p.name for p in (ws / "packages").iterdir() if not (p / "dist" / "index.js").is_file()
        ]
        if missing:
            raise SystemExit(
                f"{self.name}: {len(missing)} packages have no dist/index.js after the run in {ws}"
            )

    def finish(self, ws: Path) -> None:
        """Put edited files back, so the next scenario starts from the committed tree."""
        if self.name in ("leaf", "core"):
            subprocess.run(["git", "checkout", "-q", "--", self.edited(ws)], cwd=ws, check=True)

    def edited(self, ws: Path) -> str:
        key = (
            "top_file" if self.name == "leaf" else "leaf_file"
        )  # the generator's names: top has no dependants
        return meta(ws)[key]


SCENARIOS = {
    s.name: s
    for s in (
        Scenario("cold", ("build",), 0, "empty cache, no outputs: every task runs"),
        Scenario("warm", ("build",), 1, "nothing changed, everything cached, outputs in place"),
        Scenario("restore", ("build",), 1, "every dist/ deleted, everything cached"),
        Scenario("leaf", ("build",), 1, "one source file of a top package edited: only it runs"),
        Scenario(
            "core", ("build",), 0, "one source file of pkg-0000 edited: its dependants cascade"
        ),
        Scenario("multi", ("build", "test", "lint"), 1, "`build test lint`, everything cached"),
    )
}
ORDER = ("cold", "warm", "restore", "leaf", "core", "multi")
