"""`--ui=tui` (issue 17, "Live view"): a split view on a real terminal, a tmux pane — the task list,
the selected task's output, j/k and the arrows to select, q to quit; the run's exit code is the
exit code. Off a terminal the stream output with one note. Every wait is on what the pane shows
or a file appearing (terminal.py), never on time passing."""

from __future__ import annotations

import os
import shlex
import signal
import sys
from pathlib import Path

import pytest
from support.terminal import pane_fixture, vx_in_shell, wait_for_file  # noqa: F401 (the `pane` fixture)
from support.turbo import small_turborepo
from support.workspace import SRC, Repo


def two_builds(repo: Repo, app_command: str = "echo app-says-hi; exit 3") -> Repo:
    return repo.write(
        {
            "package.json": {"name": "root", "private": True, "workspaces": ["packages/*"]},
            ".gitignore": "node_modules/\n.vx/\ncode.txt\npid.txt\n",
            "packages/lib/package.json": {"name": "lib", "version": "1.0.0"},
            "packages/lib/vx.config.json": {
                "tasks": {"build": {"exec": {"command": "echo lib-says-hello; echo lib-line-2"}}}
            },
            "packages/app/package.json": {
                "name": "app",
                "version": "1.0.0",
                "dependencies": {"lib": "1.0.0"},
            },
            "packages/app/vx.config.json": {
                "tasks": {"build": {"exec": {"command": app_command}, "dependsOn": ["^build"]}}
            },
        }
    ).commit()


def test_tui_lists_tasks_shows_the_selected_output_and_keeps_the_exit_code(repo, pane):
    """Kept open (`--keep-ui`): the list holds both tasks, the pane on the one that ran last (it
    failed); j/k and the arrows move the selection and the right pane follows; q after the run
    closes the view, the scrollback gets the rows, the failure's frame and the footer, and vx
    exits 1 (app failed)."""
    two_builds(repo)
    p = pane(vx_in_shell(repo, "run", "build", "--ui=tui", "--keep-ui"), repo.root)
    shown = p.wait_for("run over: exit 1")
    assert "lib#build" in shown and "app#build" in shown, shown
    shown = p.wait_for("output: app#build")
    assert "app-says-hi" in shown and "lib-says-hello" not in shown, shown
    p.keys("k")
    shown = p.wait_for("output: lib#build")
    assert "lib-says-hello" in shown and "app-says-hi" not in shown, shown
    p.keys("j")
    shown = p.wait_for("output: app#build")
    assert "app-says-hi" in shown and "lib-says-hello" not in shown, shown
    p.keys("k")
    p.wait_for("output: lib#build")
    p.keys("Down")
    p.wait_for("output: app#build")
    p.keys("q")
    assert wait_for_file(repo.root / "code.txt", p) == "1", p.text()
    after = p.text()
    assert "output: app#build" not in after, after  # the view is gone
    assert "2 tasks" in after and "1 failed" in after, after
    assert "app-says-hi" in after, after  # the failure's frame, whole, in the scrollback
    assert "Traceback" not in after, after


@pytest.mark.feature("CLI-61")
def test_tui_closes_by_itself_when_the_run_ends_and_prints_the_outcome(repo, pane):
    """No key pressed: the run ends, the view closes, and the scrollback holds the rows, the
    failure's frame and the footer; vx exits 1."""
    two_builds(repo)
    p = pane(vx_in_shell(repo, "run", "build", "--ui=tui"), repo.root)
    assert wait_for_file(repo.root / "code.txt", p) == "1", p.text()
    after = p.text()
    assert "run over" not in after and "output: " not in after, after
    assert "2 tasks" in after and "1 failed" in after and "app-says-hi" in after, after
    assert "Traceback" not in after, after


def turbo_ui(repo: Repo, ui: object) -> Repo:
    files = small_turborepo()
    files["turbo.json"]["ui"] = ui  # type: ignore[index]
    return repo.write(files).commit()


@pytest.mark.feature("CLI-61")
def test_turbo_json_ui_tui_opens_the_view_on_a_terminal(repo, pane):
    """turbo.json's `"ui": "tui"` is `--ui=tui` when no flag says otherwise."""
    turbo_ui(repo, "tui")
    p = pane(vx_in_shell(repo, "run", "build", "--keep-ui"), repo.root)
    shown = p.wait_for("run over: exit 0")
    assert "a#build" in shown and "b#build" in shown, shown
    p.keys("q")
    assert wait_for_file(repo.root / "code.txt", p) == "0", p.text()
    assert "2 tasks" in p.text(), p.text()


@pytest.mark.feature("CLI-61")
def test_turbo_json_ui_gives_way_to_the_flag_and_to_a_pipe(repo, pane):
    """`--ui=stream` beats turbo.json's `"ui": "tui"`, and off a terminal the stream is as ever,
    without a note; a value turbo does not know is refused."""
    turbo_ui(repo, "tui")
    p = pane(vx_in_shell(repo, "run", "build", "--ui=stream"), repo.root)
    assert wait_for_file(repo.root / "code.txt", p) == "0", p.text()
    assert "2 tasks" in p.text() and "run over" not in p.text(), p.text()
    piped = repo.vx("run", "build")
    assert piped.code == 0 and "needs a terminal" not in piped.err, piped.err
    turbo_ui(repo, "web")
    bad = repo.vx("run", "build")
    assert bad.code == 2 and "turbo.json" in bad.err and "ui" in bad.err, bad.err


@pytest.mark.parametrize("key", ["q", "C-c"])
def test_tui_q_during_the_run_tears_the_tasks_down_as_ctrl_c(repo, pane, key):
    """q or Ctrl-C while a task runs stops the run as Ctrl-C on the stream does: the task's
    process is gone when vx returns, and the exit code is 130."""
    two_builds(repo, app_command="echo $$ > ../../pid.txt; echo app-waiting; exec sleep 600")
    p = pane(vx_in_shell(repo, "run", "build", "--ui=tui"), repo.root)
    pid = int(wait_for_file(repo.root / "pid.txt", p))
    p.wait_for("app#build  running")
    p.keys(key)
    assert wait_for_file(repo.root / "code.txt", p) == "130", p.text()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert "Traceback" not in p.text()


def test_tui_sigterm_to_vx_closes_the_view_by_itself(repo, pane):
    """A run stopped from outside (SIGTERM to vx) tears its tasks down and closes the view
    without waiting for a key: exit 143, the terminal given back."""
    two_builds(repo, app_command="echo $$ > ../../pid.txt; exec sleep 600")
    p = pane(vx_in_shell(repo, "run", "build", "--ui=tui"), repo.root)
    task = int(wait_for_file(repo.root / "pid.txt", p))
    p.wait_for("app#build  running")
    shell = int(p._tmux("list-panes", "-F", "#{pane_pid}").split()[0])
    children = Path(f"/proc/{shell}/task/{shell}/children").read_text().split()
    assert len(children) == 1, children  # `env … python -m vx` (env execs python)
    os.kill(int(children[0]), signal.SIGTERM)
    assert wait_for_file(repo.root / "code.txt", p) == "143", p.text()
    with pytest.raises(ProcessLookupError):
        os.kill(task, 0)
    assert "output: " not in p.text() and "Traceback" not in p.text(), p.text()


def test_tui_off_a_terminal_streams_with_one_note(repo):
    """No terminal (a pipe, CI): the stream output, as without the flag, and one note saying so."""
    two_builds(repo, app_command="echo app-says-hi")
    res = repo.vx("run", "build", "--ui=tui", env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert res.code == 0, res.out + res.err
    assert res.err.count("--ui=tui needs a terminal") == 1, res.err
    assert "2 tasks" in res.err, res.err
    imported = {line.split("|")[-1].strip() for line in res.err.splitlines() if "|" in line}
    # only the view's own process imports textual
    assert "vx.pipeline" in imported and "textual" not in imported


def test_tui_an_unknown_ui_is_refused(repo):
    two_builds(repo)
    res = repo.vx("run", "build", "--ui=web")
    assert res.code == 2 and "--ui" in res.err and "stream" in res.err, res.err


def test_tui_without_textual_is_refused_before_anything_runs(repo, pane):
    """On a terminal without the textual package: exit 2 with the install hint, nothing run."""
    two_builds(repo, app_command="touch ../../ran.txt")
    code = repo.root / "code.txt"
    script = (
        "import sys; sys.modules['textual'] = None; from vx.cli.main import main; "
        "raise SystemExit(main(['run', 'build', '--ui=tui']))"
    )
    line = (
        f"env -u CI PYTHONPATH={shlex.quote(SRC)} NO_COLOR=1 {shlex.quote(sys.executable)} "
        f"-c {shlex.quote(script)}; echo $? > {code}.tmp && mv {code}.tmp {code}; sleep 600"
    )
    p = pane(line, repo.root)
    assert wait_for_file(code, p) == "2", p.text()
    assert "pip install -e '.[tui]'" in p.text(), p.text()
    assert not (repo.root / "ran.txt").exists()
