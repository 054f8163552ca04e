"""The README's first command, as written there, on a copy of this checkout: it installs vx into
the checkout's own venv, links `vx` into a bin folder, and runs the example's `check` twice (the
second all from the cache). Real pip (from the registry), real git, real node."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def first_command() -> str:
    readme = (ROOT / "README.md").read_text()
    return re.search(r"```sh\n(.+?)\n```", readme, re.S).group(1).strip()


def checkout_copy(to: Path) -> None:
    """The tracked files as they are in the working tree (uncommitted edits included)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    for rel in filter(None, listed.split("\0")):
        source = ROOT / rel
        if source.is_file() or source.is_symlink():
            (to / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, to / rel, follow_symlinks=False)


@pytest.mark.feature("IN-03")
def test_the_readme_s_first_command_installs_vx_and_runs_the_example(tmp_path):
    command = first_command()
    assert command.startswith("./dev/install && "), command
    checkout, bin_dir = tmp_path / "vx", tmp_path / "bin"
    checkout_copy(checkout)
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("VX_", "PYTHON", "CI", "VIRTUAL"))
    }
    env.update(
        VX_INSTALL_BIN=str(bin_dir), PATH=f"{bin_dir}:{os.environ['PATH']}", HOME=str(tmp_path)
    )
    first = subprocess.run(
        ["bash", "-c", command], cwd=checkout, env=env, capture_output=True, text=True, timeout=600
    )
    assert first.returncode == 0, first.stdout + first.stderr
    assert os.path.realpath(bin_dir / "vx") == str(checkout / ".venv" / "bin" / "vx")
    assert "12 tasks" in first.stdout + first.stderr
    again = subprocess.run(
        ["vx", "run", "check"],
        cwd=checkout / "examples" / "basic",
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 0, again.stderr
    assert "12 tasks · 12 cached (100%)" in again.stdout + again.stderr
