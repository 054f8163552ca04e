"""The task sandbox end to end with real bwrap and strace (SB-01..SB-07, SB-10..SB-13, SB-15, SB-20):
each scenario asserts the exact violation lines of the frame and the summary."""

from __future__ import annotations

import os
import pty
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.commands import needs
from support.sandbox import app, sandboxed, violation_lines
from support.workspace import SRC, npm_workspace

pytestmark = needs("bwrap", "strace", "node")


# ---------------------------------------------------------------- reads and writes


@pytest.mark.feature("SB-07")
def test_reading_a_linked_sibling_the_key_does_not_fold_names_the_missing_edge(repo):
    lib = {"files": {"src/index.js": "lib\n"}, "tasks": {"build": {"exec": {"command": "true"}}}}
    app(
        repo,
        {
            "build": sandboxed(
                "cat src/a.js ../lib/src/index.js || true", read=["src/**"], cache=["dist/**"]
            )
        },
        deps=["lib"],
        lib=lib,
    )
    res = repo.vx("run", "build", cwd="packages/app")
    assert res.code == 1
    assert violation_lines(res.out) == [
        '│ read  packages/lib/src/index.js  → dependsOn "lib#build": the key folds no task of lib, '
        "so the sandbox withholds it"
    ]
    assert "failed (exit 1, 1 sandbox violation)" in res.out
    assert res.task("app#build")["sandboxViolations"] == [
        {
            "kind": "read",
            "path": "packages/lib/src/index.js",
            "grant": 'dependsOn "lib#build": the key folds no task of lib, so the sandbox withholds it',
        }
    ]


@pytest.mark.feature("SB-07")
def test_a_withheld_linked_package_is_named_by_a_task_it_declares(repo):
    lib = {
        "files": {"src/index.js": "lib\n"},
        "tasks": {"lint": {"exec": {"command": "true"}}, "build": {"exec": {"command": "true"}}},
    }
    app(
        repo,
        {"build": sandboxed("cat ../lib/src/index.js", cache=["dist/**"])},
        deps=["lib"],
        lib=lib,
    )
    res = repo.vx("run", "build", cwd="packages/app")
    assert res.code == 1
    assert violation_lines(res.out) == [
        '│ read  packages/lib/src/index.js  → dependsOn "lib#build": the key folds no task of lib, '
        "so the sandbox withholds it"
    ]


@pytest.mark.feature("SB-07")
def test_a_withheld_linked_package_that_declares_no_task_names_what_can_be_written(repo):
    lib = {"files": {"src/index.js": "lib\n"}}
    task = sandboxed("cat ../lib/src/index.js", cache=["dist/**"])
    app(repo, {"build": task}, deps=["lib"], lib=lib)
    res = repo.vx("run", "build", cwd="packages/app")
    assert res.code == 1
    hint = (
        'dependsOn "lib#build" (lib declares none: the implicit one keys its files): the key '
        "folds no task of lib, so the sandbox withholds it"
    )
    assert violation_lines(res.out) == [f"│ read  packages/lib/src/index.js  → {hint}"]
    # what the hint says, written, is accepted, runs clean and keys lib's files
    task["dependsOn"] = ["lib#build"]
    app(repo, {"build": task}, deps=["lib"], lib=lib)
    res = repo.vx("run", "build", cwd="packages/app")
    assert res.code == 0 and "lib\n" in res.out and violation_lines(res.out) == [], (
        res.out + res.err
    )
    (repo.root / "packages/lib/src/index.js").write_text("lib 2\n")
    assert repo.vx("run", "build", cwd="packages/app").task("app#build")["cache"] == "miss"


@pytest.mark.feature("SB-07")
def test_a_withheld_nx_project_without_build_is_never_granted_through_its_pass_over(repo):
    """In an Nx workspace lib's implicit `build` keys nothing of its own (Nx's `^build` passes
    over it), so the hint names no `lib#build`, and writing one grants nothing: lib's files
    would be read with no key folding them. Failed before: the hint said the implicit one keys
    its files, and with `lib#build` in dependsOn the read was granted and an edit to lib's file
    was a hit that printed the old text."""
    lib = {"files": {"src/index.js": "lib\n"}}
    task = sandboxed("cat ../lib/src/index.js", cache=["dist/**"])
    app(repo, {"build": task}, deps=["lib"], lib=lib)
    repo.write({"nx.json": {}}).commit()  # app keeps its vx.config; lib is an Nx project
    res = repo.vx("run", "build", cwd="packages/app")
    assert res.code == 1
    hint = (
        "dependsOn a task of lib keyed on its files (lib declares no build, and an Nx project's "
        "implicit one keys none of them): the key folds no task of lib, so the sandbox withholds it"
    )
    assert violation_lines(res.out) == [f"│ read  packages/lib/src/index.js  → {hint}"]
    task["dependsOn"] = ["lib#build"]
    app(repo, {"build": task}, deps=["lib"], lib=lib)
    res = repo.vx("run", "build", cwd="packages/app")
    assert res.code == 1
    assert violation_lines(res.out) == [f"│ read  packages/lib/src/index.js  → {hint}"]


@pytest.mark.feature("SB-05", "SB-07")
def test_reading_an_unlinked_sibling_names_the_read_grant_and_a_folded_one_is_granted(
    repo,
):
    lib = {"files": {"src/index.js": "lib\n"}, "tasks": {"build": {"exec": {"command": "true"}}}}
    other = {"files": {"x.js": "x\n"}}
    cmd = "cat ../lib/src/index.js && (cat ../other/x.js || true)"
    task = sandboxed(cmd, cache=["dist/**"])
    task["dependsOn"] = ["^build"]
    app(repo, {"build": task}, deps=["lib"], lib=lib, other=other)
    res = repo.vx("run", "build", cwd="packages/app")
    assert "lib\n" in res.out  # lib#build is folded into the key: the whole package is granted
    assert violation_lines(res.out) == ['│ read  packages/other/x.js  → allow.read "../other/x.js"']


@pytest.mark.feature("SB-12")
def test_writing_beside_the_outputs_is_a_violation_and_nothing_is_cached(repo):
    cmd = "mkdir -p dist && echo out > dist/o.js && echo log > build.log"
    app(repo, {"build": sandboxed(cmd, read=["src/**"], write=["dist/"], cache=["dist/**"])})
    res = repo.vx("run", "build", cwd="packages/app")
    assert res.code == 1
    assert violation_lines(res.out) == ['│ write packages/app/build.log  → allow.write "build.log"']
    assert (repo.root / "packages/app/dist/o.js").read_text() == "out\n"
    assert not (repo.root / "packages/app/build.log").exists()  # it landed in the scratch
    again = repo.vx("run", "build", cwd="packages/app")
    assert again.task("app#build")["cache"] == "miss"  # a task with violations is never cached


def test_a_child_that_cds_and_reads_a_relative_path_is_resolved_against_its_own_cwd(
    repo,
):  # pitfall 14
    cmd = "mkdir -p out && (cd src && cat ../fixtures/data.json ../../../package.json 2>&1; cd .. ; true)"
    app(
        repo,
        {"t": sandboxed(cmd, read=["src/**"], write=["out/"])},
        files={"fixtures/data.json": "{}"},
    )
    res = repo.vx("run", "t", cwd="packages/app")
    assert violation_lines(res.out) == [
        '│ read  packages/app/fixtures/data.json  → allow.read "fixtures/data.json"'
    ]


def test_a_node_read_through_io_uring_is_still_seen(repo):  # pitfall 22
    script = "require('fs').readFile('data.txt', (e, d) => console.log(e ? e.code : String(d)))"
    cmd = f'UV_USE_IO_URING=1 node -e "{script}"'
    app(repo, {"t": sandboxed(cmd, read=["src/**", "package.json"])}, files={"data.txt": "hello"})
    res = repo.vx("run", "t", cwd="packages/app")
    assert "ENOENT" in res.out
    assert violation_lines(res.out) == ['│ read  packages/app/data.txt  → allow.read "data.txt"']


def test_a_write_under_a_glob_that_matched_nothing_lands_in_scratch_without_violation(
    repo,
):  # seed 0.0.217
    cmd = (
        "mkdir .0123456789abcdef-00000000.tmp && echo rt > .0123456789abcdef-00000000.tmp/f && "
        "cat .0123456789abcdef-00000000.tmp/f"
    )
    app(repo, {"t": sandboxed(cmd, read=["src/**"], write=[".*.tmp/**", "dist/"])})
    res = repo.vx("run", "t", cwd="packages/app")
    assert res.code == 0, res.out + res.err
    assert "rt\n" in res.out and violation_lines(res.out) == []
    assert not list((repo.root / "packages/app").glob(".*.tmp"))


@pytest.mark.feature("SB-04")
def test_write_grants_are_created_and_unwritten_placeholders_removed(repo):
    app(repo, {"t": sandboxed("echo x > gen/out.txt", write=["gen/", "stats.json"])})
    res = repo.vx("run", "t", cwd="packages/app")
    assert res.code == 0, res.out + res.err
    assert (repo.root / "packages/app/gen/out.txt").read_text() == "x\n"
    assert not (repo.root / "packages/app/stats.json").exists()


# ---------------------------------------------------------------- outside the workspace


def fake_home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("PRIVATE-KEY-MATERIAL\n")
    (home / ".npmrc").write_text("//registry/:_authToken=NPM-TOKEN\n")
    (home / "notes.txt").write_text("readable\n")
    return home


@pytest.mark.feature("SB-06")
def test_credential_stores_are_hidden_and_named_in_a_note(repo, tmp_path):
    home = fake_home(tmp_path)
    cmd = "cat ~/notes.txt; cat ~/.ssh/id_rsa; cat ~/.npmrc; true"
    app(repo, {"t": sandboxed(cmd)})
    res = repo.vx("run", "t", cwd="packages/app", env={"HOME": str(home)})
    assert res.code == 0, res.out + res.err
    assert "readable\n" in res.out  # the rest of HOME stays readable
    assert "PRIVATE-KEY" not in res.out + res.err and "NPM-TOKEN" not in res.out + res.err
    assert violation_lines(res.out) == []  # outside the workspace: a note, not a violation
    assert (
        "vx: app#t: the sandbox hid ~/.ssh/id_rsa, a credential store; if the task needs it, "
        'grant it: allow.read "~/.ssh/id_rsa"'
    ) in res.err


@pytest.mark.feature("SB-12")
def test_a_failure_after_a_write_refused_outside_the_project_gets_the_grant_hint(repo, tmp_path):
    home = fake_home(tmp_path)
    (home / ".cache" / "tool").mkdir(parents=True)
    app(repo, {"t": sandboxed("echo x > ~/.cache/tool/blob || exit 3")})
    res = repo.vx("run", "t", cwd="packages/app", env={"HOME": str(home)})
    assert res.code == 1 and "failed (exit 3)" in res.out
    assert (
        "vx: app#t: the sandbox refused writes outside the project, which are not reported as violations: "
        "~/.cache/tool/blob. If the task needs one, grant its directory, e.g. "
        '`allow: { write: ["~/.cache/tool/"] }`'
    ) in res.err
    granted = sandboxed("echo x > ~/.cache/tool/blob", write=["~/.cache/tool/"])
    app(repo, {"t": granted})
    assert repo.vx("run", "t", cwd="packages/app", env={"HOME": str(home)}).code == 0
    assert (home / ".cache/tool/blob").read_text() == "x\n"


@pytest.mark.feature("EX-03", "SB-15")
def test_a_secret_in_vx_environment_is_not_readable_inside(repo):
    cmd = (
        "env; cat /proc/1/environ; for f in /proc/[0-9]*/environ; do cat $f; done 2>/dev/null; true"
    )
    app(repo, {"t": sandboxed(cmd)})
    res = repo.vx("run", "t", cwd="packages/app", env={"MY_SECRET": "hunter2-secret"})
    assert res.code == 0, res.out + res.err
    assert "VX_SANDBOX=1" in res.out and "hunter2-secret" not in res.out


def test_tiocsti_cannot_push_input_into_vx_terminal(repo):  # pitfall 24
    probe = (
        "import fcntl, os, termios\n"
        "for name in ('/dev/tty', 0, 1, 2):\n"
        "    try:\n"
        "        fd = os.open(name, os.O_RDWR) if isinstance(name, str) else name\n"
        "        for c in b'echo pwned\\n': fcntl.ioctl(fd, termios.TIOCSTI, bytes([c]))\n"
        "        print(name, 'INJECTED')\n"
        "    except OSError as e:\n"
        "        print(name, 'refused', e.errno)\n"
    )
    app(repo, {"t": sandboxed("python3 tiocsti.py")}, files={"tiocsti.py": probe})
    (repo.root / "packages/app/vx.config.json").write_text(
        '{"tasks": {"t": {"exec": {"command": "python3 tiocsti.py", '
        '"sandbox": {"allow": {"read": ["tiocsti.py"]}}}}}}'
    )
    repo.commit()
    master, slave = pty.openpty()
    env = {
        **{
            k: v for k, v in os.environ.items() if not k.startswith("VX_") or k == "VX_SHARED_STORE"
        },
        "PYTHONPATH": SRC,
        "NO_COLOR": "1",
    }
    proc = subprocess.run(
        [sys.executable, "-m", "vx", "run", "t"],
        cwd=repo.root / "packages/app",
        env=env,
        stdin=slave,
        capture_output=True,
        text=True,
        timeout=60,
        start_new_session=True,
    )
    os.set_blocking(slave, False)
    try:
        pending = os.read(slave, 1000)
    except BlockingIOError:
        pending = b""
    os.close(master)
    os.close(slave)
    assert "INJECTED" not in proc.stdout and proc.stdout.count("refused") == 4, (
        proc.stdout + proc.stderr
    )
    assert b"pwned" not in pending


# ---------------------------------------------------------------- processes


@pytest.mark.feature("SB-15")
def test_a_background_child_that_outlives_the_shell_neither_hangs_nor_survives(
    repo,
):  # pitfall 18
    app(repo, {"t": sandboxed("(sleep 987.25 &) ; sleep 987.5 & echo started")})
    started = time.monotonic()
    res = repo.vx("run", "t", cwd="packages/app", timeout=600)
    assert res.code == 0 and "started" in res.out
    assert time.monotonic() - started < 600  # neither background sleep (987 s) was waited for
    assert not [p for p in _cmdlines() if "987.25" in p or "987.5" in p]


def _cmdlines() -> list[str]:
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            out.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode())
        except OSError:
            pass
    return out


@pytest.mark.feature("EX-05", "SB-15")
def test_a_timeout_reaches_the_task_politely_inside_the_sandbox(repo):
    cmd = "trap 'echo got-term; exit 3' TERM; echo ready; while :; do sleep 0.05; done"
    task = sandboxed(cmd)
    task["exec"]["timeout"] = 800
    app(repo, {"t": task})
    res = repo.vx("run", "t", cwd="packages/app", timeout=30)
    assert res.code == 1 and "got-term" in res.out
    assert res.task("app#t")["timedOut"] is True


# ---------------------------------------------------------------- availability


@pytest.mark.feature("SB-01", "SB-13")
def test_without_bwrap_the_task_fails_and_never_runs_unsandboxed(repo):
    app(repo, {"t": sandboxed("echo ran > ran.txt")})
    res = repo.vx("run", "t", cwd="packages/app", env={"VX_BWRAP": ""})
    assert res.code == 1 and not (repo.root / "packages/app/ran.txt").exists()
    assert "vx: sandbox not available: bwrap not found; install bubblewrap" in res.err


@pytest.mark.feature("SB-13")
def test_without_strace_it_enforces_reports_nothing_and_says_so_once(repo):
    tasks = {"a": sandboxed("cat fixture.json || true"), "b": sandboxed("cat fixture.json || true")}
    app(repo, tasks, files={"fixture.json": "SECRET-FIXTURE"})
    res = repo.vx("run", "app#a", "app#b", env={"VX_STRACE": ""})
    assert res.code == 0, res.out + res.err
    assert "SECRET-FIXTURE" not in res.out  # still enforced
    assert res.err.count("untraced (strace not found)") == 1


@pytest.mark.feature("SB-01")
def test_a_cache_hit_never_arms_the_sandbox(repo):
    cmd = "mkdir -p dist && cat src/a.js > dist/o.js"
    app(repo, {"build": sandboxed(cmd, read=["src/**"], write=["dist/"], cache=["dist/**"])})
    assert repo.vx("run", "build", cwd="packages/app").code == 0
    (repo.root / "packages/app/dist/o.js").unlink()
    res = repo.vx(
        "run", "build", cwd="packages/app", env={"VX_BWRAP": ""}
    )  # no sandbox: only a hit can succeed
    assert res.code == 0 and res.task("app#build")["cache"] == "local"


# ---------------------------------------------------------------- refusals before the run


@pytest.mark.feature("SB-04")
def test_a_write_grant_into_a_nested_project_is_refused_before_anything_runs(repo):
    repo.write(npm_workspace({"app": {"tasks": {}}})).commit()
    (repo.root / "package.json").write_text(
        '{"name": "root", "private": true, "workspaces": ["packages/*"]}'
    )
    (repo.root / "vx.config.json").write_text(
        '{"tasks": {"t": {"exec": {"command": "echo ran", "sandbox": {"allow": {"write": ["packages/app/dist/"]}}}}}}'
    )
    repo.commit()
    res = repo.vx("run", "//#t")
    assert res.code == 2 and "ran" not in res.out
    assert "write grant `packages/app/dist/` would make packages/app writable" in res.err
    assert "in: vx.config.json, tasks.t.exec.sandbox.allow.write[0]" in res.err


@pytest.mark.feature("EX-11")
def test_ctrl_c_reaches_the_task_inside_and_nothing_survives(repo):  # issue item 6
    cmd = (
        "trap 'echo int > state/got; exit 4' INT TERM; sh -c 'trap \"\" INT TERM; sleep 61.75' & "
        "echo ready > state/ready; wait"
    )
    app(repo, {"t": sandboxed(cmd, write=["state/"])})
    env = {
        **{
            k: v for k, v in os.environ.items() if not k.startswith("VX_") or k == "VX_SHARED_STORE"
        },
        "PYTHONPATH": SRC,
        "NO_COLOR": "1",
        "VX_KILL_GRACE_MS": "1000",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "vx", "run", "t"],
        cwd=repo.root / "packages/app",
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    ready = repo.root / "packages/app/state/ready"
    deadline = time.monotonic() + 120
    while not (ready.exists() and ready.read_text()) and time.monotonic() < deadline:
        time.sleep(0.02)
    started = time.monotonic()
    proc.send_signal(2)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, out + err
    assert time.monotonic() - started < 45  # the 1 s grace, not the ignoring child's 61.75 s
    assert (
        repo.root / "packages/app/state/got"
    ).read_text() == "int\n"  # the polite signal reached the trap
    assert not [p for p in _cmdlines() if "61.75" in p]


@pytest.mark.feature("SB-09")
def test_unix_sockets_are_refused_unless_granted(repo):
    cmd = "python3 -c \"import socket; socket.socket(socket.AF_UNIX); print('unix ok')\" 2>&1 | tail -1"
    granted = sandboxed(cmd)
    granted["exec"]["sandbox"]["allow"]["unixSockets"] = True
    app(repo, {"t": sandboxed(cmd), "u": granted})
    assert (
        "PermissionError: [Errno 1] Operation not permitted"
        in repo.vx("run", "t", cwd="packages/app").out
    )
    assert "unix ok" in repo.vx("run", "u", cwd="packages/app").out


@pytest.mark.feature("SB-07")
def test_require_of_a_linked_package_through_node_modules(repo):  # npm-style links
    lib = {
        "files": {"index.js": "module.exports = 'from lib';\n"},
        "tasks": {"build": {"exec": {"command": "true"}}},
    }
    withheld = sandboxed("node -e \"console.log(require('lib'))\"", cache=["dist/**"])
    folded = sandboxed("node -e \"console.log(require('lib'))\"", cache=["dist/**"])
    folded["dependsOn"] = ["^build"]
    app(repo, {"withheld": withheld, "folded": folded}, deps=["lib"], lib=lib)
    (repo.root / "node_modules").mkdir()
    for name in ("app", "lib"):
        (repo.root / "node_modules" / name).symlink_to(f"../packages/{name}")
    res = repo.vx("run", "withheld", cwd="packages/app")
    assert res.code == 1 and "Cannot find module 'lib'" in res.out
    assert violation_lines(res.out) == [
        '│ read  packages/lib/package.json  → dependsOn "lib#build": the key folds no task of lib, '
        "so the sandbox withholds it"
    ]
    res = repo.vx("run", "folded", cwd="packages/app")
    assert res.code == 0 and "from lib" in res.out, res.out + res.err


@pytest.mark.feature("SB-04")
def test_a_write_grant_vx_cannot_create_fails_the_task_with_the_reason(repo):
    app(
        repo,
        {"t": sandboxed("echo did-run", write=["blocked/sub/"])},
        files={"blocked": "a file, not a directory"},
    )
    res = repo.vx("run", "t", cwd="packages/app")
    assert (
        res.code == 1
        and "\ndid-run" not in res.out
        and "failed (exit 1, could not start)" in res.out
    )
    assert "cannot prepare the sandbox:" in res.err and "blocked/sub" in res.err


# ---------------------------------------------------------------- a tracer that fails (SB-13)


def failing_strace(tmp_path: Path, times: str) -> str:
    """A stand-in for strace that refuses to start the traced run (`once`: only the first time,
    leaving a mark in the task's write grant; `always`), and passes the probe through. It runs
    outside the sandbox, in the task's directory, as strace does."""
    (tmp_path / "bin").mkdir()
    wrapper = tmp_path / "bin" / "strace"
    mark = (
        'if [ -e out/.failed ]; then exec "$STRACE" "$@"; fi; : > out/.failed; '
        if times == "once"
        else ""
    )
    wrapper.write_text(
        f"#!/bin/sh\nSTRACE={shutil.which('strace')}\n"
        f'case " $* " in *" -DD "*) {mark}'
        'echo "strace: ptrace(PTRACE_SEIZE, 2): Operation not permitted" >&2; exit 1;; esac\n'
        'exec "$STRACE" "$@"\n'
    )
    wrapper.chmod(0o755)
    return str(wrapper)


@pytest.mark.feature("SB-13")
def test_an_attempt_whose_tracer_failed_is_retried_once_and_still_judged(repo, tmp_path):
    strace = failing_strace(tmp_path, "once")
    app(
        repo,
        {"t": sandboxed("cat fixture.json; echo ran > out/ran.txt", write=["out/"])},
        files={"fixture.json": "{}"},
    )
    res = repo.vx("run", "t", cwd="packages/app", env={"VX_STRACE": strace})
    assert res.code == 1, res.out + res.err  # the retry ran, was traced, and its read was judged
    assert violation_lines(res.out) == [
        '│ read  packages/app/fixture.json  → allow.read "fixture.json"'
    ]
    assert (repo.root / "packages/app/out/ran.txt").read_text() == "ran\n"


@pytest.mark.feature("SB-13")
def test_a_tracer_that_fails_twice_fails_the_task_with_what_it_said(repo, tmp_path):
    strace = failing_strace(tmp_path, "always")
    app(repo, {"t": sandboxed("echo ran > out/ran.txt", write=["out/"])})
    res = repo.vx("run", "t", cwd="packages/app", env={"VX_STRACE": strace})
    assert res.code == 1 and not (repo.root / "packages/app/out/ran.txt").exists()
    assert (
        "the sandbox's tracer failed twice: strace: ptrace(PTRACE_SEIZE, 2): Operation not permitted"
        in res.out + res.err
    )


# ---------------------------------------------------------------- the root project's directories


@pytest.mark.parametrize("through", ["link", "path", "require"])
def test_a_read_of_a_root_project_directory_is_a_violation_naming_the_file(repo, through):
    """`shared/` at the workspace root belongs to the root project, not to a member; the task
    reads `shared/x.js` through an in-project link (`lib -> ../../shared`), by its path, or with
    node's `require` (which stats before it opens). Before, only the ENOENT showed: the root
    project's files were all exempt, where docs/sandbox.md exempts only root-level ones. Now the
    read is a violation naming the file and the grant, and with the grant the read succeeds."""
    path = "lib/x.js" if through == "link" else "../../shared/x.js"
    command = f"node -e \"require('{path}')\"" if through == "require" else f"node {path}"
    app(repo, {"build": sandboxed(command)})
    (repo.root / "shared").mkdir()
    (repo.root / "shared/x.js").write_text("console.log('shared ' + 'read')\n")
    if through == "link":
        (repo.root / "packages/app/lib").symlink_to("../../shared")
    repo.commit()
    res = repo.vx("run", "build", cwd="packages/app")
    assert res.code == 1, res.out + res.err
    assert violation_lines(res.out) == ['│ read  shared/x.js  → allow.read "../../shared/x.js"']
    app(repo, {"build": sandboxed(command, read=[path])})
    res = repo.vx("run", "build", cwd="packages/app")
    assert res.code == 0 and "shared read" in res.out, res.out + res.err
    assert violation_lines(res.out) == []
