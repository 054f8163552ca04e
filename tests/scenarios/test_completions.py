"""`vx completions` (CLI-12): scripts derived from the help texts, exercised in a real bash."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from support.workspace import SRC

from vx.cli.main import RUN_FLAGS


def completions(shell: str) -> str:
    env = {**os.environ, "PYTHONPATH": SRC}
    proc = subprocess.run(
        [sys.executable, "-m", "vx", "completions", shell],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def complete(words: list[str]) -> list[str]:
    """What bash offers for `words` (the last one being typed), after eval-ing the script."""
    program = (
        f'eval "$(cat)"; COMP_WORDS=({" ".join(words)}); COMP_CWORD={len(words) - 1}; _vx; '
        'printf "%s\\n" "${COMPREPLY[@]}"'
    )
    proc = subprocess.run(
        ["bash", "-c", program],
        input=completions("bash"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


@pytest.mark.feature("CLI-12")
def test_bash_completes_verbs_and_each_verbs_flags():
    assert complete(["vx", "w"]) == ["watch", "why"]
    assert complete(["vx", "run", "--fi"]) == ["--filter"]
    assert "--dry" not in complete(["vx", "watch", "--d"])  # refused by watch, so not offered


@pytest.mark.feature("CLI-12")
def test_every_run_flag_is_in_the_help_and_so_completed():
    offered = complete(["vx", "run", "-"])
    assert set(RUN_FLAGS) <= set(offered), set(RUN_FLAGS) - set(offered)


@pytest.mark.feature("CLI-12")
@pytest.mark.parametrize(
    "shell, marker, flag",
    [("zsh", "compdef _vx vx", "--filter"), ("fish", "complete -c vx", "-l filter")],
)
def test_zsh_and_fish_scripts(shell, marker, flag):
    text = completions(shell)
    assert marker in text and flag in text


@pytest.mark.feature("CLI-12")
def test_an_unknown_shell_is_refused():
    proc = subprocess.run(
        [sys.executable, "-m", "vx", "completions", "tcsh"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": SRC},
        timeout=60,
    )
    assert proc.returncode == 2 and "bash, zsh, fish" in proc.stderr
