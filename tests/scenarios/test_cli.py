"""The command line surface: version, help, startup imports, --dry, --summarize (CLI-14, CLI-36, OBS-02)."""

import json
import os
import subprocess
import sys

import pytest
from support.terminal import pane_fixture, vx_in_shell, wait_for_file  # noqa: F401 (the `pane` fixture)
from support.workspace import SRC, build_task, npm_workspace, one_build


def py(*args, cwd=None):
    env = {**os.environ, "PYTHONPATH": SRC}
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True)


def test_version_imports_nothing_heavy():
    proc = py("-X", "importtime", "-m", "vx", "--version")
    assert proc.returncode == 0 and proc.stdout.startswith("vx ")
    imported = {
        line.split("|")[-1].strip().split(".")[0]
        for line in proc.stderr.splitlines()
        if "|" in line
    }
    heavy = {"rich", "zstandard", "sqlite3", "_sqlite3", "xxhash", "yaml", "asyncio", "textual"}
    assert not imported & heavy


def test_help_and_verb_help():
    assert "usage: vx <verb>" in py("-m", "vx", "help").stdout
    run_help = py("-m", "vx", "help", "run")
    assert run_help.returncode == 0 and "--concurrency" in run_help.stdout
    assert py("-m", "vx", "run", "--help").stdout == run_help.stdout


def test_unknown_verb_and_task_as_verb_hints():
    bad = py("-m", "vx", "rnu")
    assert bad.returncode == 2 and "vx run" in bad.stderr
    task = py("-m", "vx", "build")
    assert task.returncode == 2 and "vx run build" in task.stderr


@pytest.mark.feature("CLI-36")
def test_dry_json_predicts_and_runs_nothing(repo):
    repo.write(
        npm_workspace(
            {
                "lib": {"tasks": {"build": build_task(deps=())}, "files": {"src/a.js": "A;"}},
                "app": {
                    "deps": ["lib"],
                    "tasks": {"build": build_task()},
                    "files": {"src/b.js": "B;"},
                },
            }
        )
    ).commit()
    dry = repo.vx("run", "build", "--all", "--dry=json")
    assert dry.code == 0, dry.err
    plan = json.loads(dry.out)
    assert {t["id"]: t["predicted"] for t in plan["tasks"]} == {
        "lib#build": "miss",
        "app#build": "miss",
    }
    assert not (repo.root / "packages/lib/dist").exists()
    repo.vx("run", "build", "--all")
    again = json.loads(repo.vx("run", "build", "--all", "--dry=json").out)
    assert {t["predicted"] for t in again["tasks"]} == {"hit-local"}
    text = repo.vx("run", "build", "--all", "--dry")
    assert "lib#build" in text.out and "hit-local" in text.out


@pytest.mark.feature("OBS-02")
def test_summary_json_shape(repo):
    repo.write(
        npm_workspace(
            {"lib": {"tasks": {"build": build_task(deps=())}, "files": {"src/a.js": "A;"}}}
        )
    ).commit()
    res = repo.vx("run", "build", "--all")
    s = res.summary
    assert s["ok"] is True and s["exitCode"] == 0
    [t] = s["tasks"]
    assert t["id"] == "lib#build" and t["status"] == "success" and t["cache"] == "miss"
    assert len(t["hash"]) == 16 and isinstance(t["durationMs"], (int, float))
    assert s["summary"]["total"] == 1


@pytest.mark.feature("CLI-55")
def test_footer_counts_tasks_and_cached(repo):
    repo.write(
        npm_workspace(
            {"lib": {"tasks": {"build": build_task(deps=())}, "files": {"src/a.js": "A;"}}}
        )
    ).commit()
    repo.vx("run", "build", "--all")
    res = repo.vx("run", "build", "--all")
    assert "1 tasks · 1 cached (100%)" in res.err or "1 task · 1 cached (100%)" in res.err


@pytest.mark.feature("CLI-08")
def test_info_reports_workspace_and_cache(repo):
    repo.write(
        npm_workspace(
            {"lib": {"tasks": {"build": build_task(deps=())}, "files": {"src/a.js": "A;"}}}
        )
    ).commit()
    repo.vx("run", "build", "--all")
    res = repo.vx("info", summary=False)
    assert res.code == 0, res.err
    rows = dict(
        line.split(None, 1)
        if not line.startswith("package")
        else ("package manager", line.split("manager", 1)[1].strip())
        for line in res.out.splitlines()
    )
    assert rows["root"].strip() == str(repo.root)
    assert rows["projects"].startswith("2 (1 tasks)")
    assert rows["cache"].startswith("1 entries")


def test_info_outside_a_workspace_still_answers(tmp_path):
    proc = py("-m", "vx", "info", cwd=tmp_path)
    assert proc.returncode == 0
    assert (
        "workspace  unavailable: no workspace root found" in proc.stdout
        or "unavailable" in proc.stdout
    )


@pytest.mark.feature("CLI-02")
def test_bare_run_lists_the_tasks_there_are(repo):  # off a TTY
    repo.write(
        npm_workspace(
            {
                "lib": {
                    "tasks": {"build": build_task(deps=()), "lint": {"exec": {"command": "true"}}}
                }
            }
        )
    ).commit()
    res = repo.vx("run", cwd="packages/lib", summary=False)
    assert res.code == 2
    assert "tasks: build, lint" in res.err and "Traceback" not in res.err


def test_a_reader_that_stops_early_gets_the_run_s_exit_code_and_no_traceback(repo):
    """`vx run … | head`: the closed pipe neither crashes vx nor changes what the run reports."""
    loud = {"exec": {"command": "for i in $(seq 1 20000); do echo line $i; done; exit 3"}}
    repo.write(npm_workspace({"app": {"tasks": {"t": loud}}})).commit()
    env = {
        **{
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("VX_", "CI")) or k == "VX_SHARED_STORE"
        },
        "PYTHONPATH": SRC,
    }
    script = (
        f'"{sys.executable}" -m vx run t | head -n 2 >/dev/null; echo "vx=${{PIPESTATUS[0]}}" >&2'
    )
    proc = subprocess.run(
        ["bash", "-c", script],
        cwd=repo.root / "packages/app",
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "vx=1" in proc.stderr, (
        proc.stderr
    )  # a task failed: exit 1 (the task's own 3 is in its frame)
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr, proc.stderr


def test_a_run_that_executes_a_task_loads_asyncio_without_ssl(repo):
    """asyncio is imported without `ssl` (docs/optimizations.md #23): a run with no remote
    executes its task and never loads TLS."""
    repo.write(
        npm_workspace(
            {"lib": {"tasks": {"build": build_task(deps=())}, "files": {"src/a.js": "A;"}}}
        )
    ).commit()
    probe = (
        "import sys, vx.cli.main; code = vx.cli.main.main(['run', 'build', '--all']); "
        "print(code, 'asyncio' in sys.modules, 'ssl' in sys.modules)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=repo.root,
        capture_output=True,
        text=True,
        env={"PATH": os.environ["PATH"], "PYTHONPATH": SRC, "HOME": str(repo.root)},
    )
    assert proc.stdout.strip().splitlines()[-1] == "0 True False", proc.stderr
    assert (repo.root / "packages" / "lib" / "dist" / "out.js").is_file()


def test_tls_still_loads_after_asyncio_was_imported_without_it():
    """The stand-in that keeps asyncio from loading ssl is gone afterwards: the remote cache's
    http.client gets the real module, and asyncio's own streams still work (the sandbox proxy's)."""
    probe = (
        "import sys\n"
        "from vx.fastpath.firstwave import import_asyncio\n"
        "asyncio = import_asyncio()\n"
        "assert 'ssl' not in sys.modules and asyncio.base_events.ssl is None\n"
        "import http.client, ssl\n"
        "http.client.HTTPSConnection('cache.invalid', context=ssl.create_default_context())\n"
        "async def echo():\n"
        "    async def serve(r, w):\n"
        "        w.write(await r.readline()); await w.drain(); w.close()\n"
        "    server = await asyncio.start_server(serve, '127.0.0.1', 0)\n"
        "    r, w = await asyncio.open_connection('127.0.0.1', server.sockets[0].getsockname()[1])\n"
        "    w.write(b'ping\\n'); line = await r.readline(); w.close(); server.close()\n"
        "    return line\n"
        "print(asyncio.run(echo()), type(sys.modules['ssl']).__name__)\n"
    )
    proc = py("-c", probe)
    assert proc.stdout.strip() == "b'ping\\n' module", proc.stderr


def test_asyncio_keeps_its_ssl_when_another_thread_runs():
    """With another thread alive, hiding ssl could fail that thread's own `import ssl`: then
    asyncio is imported as it is, ssl and all."""
    probe = (
        "import sys, threading, time\n"
        "threading.Thread(target=time.sleep, args=(1,), daemon=True).start()\n"
        "from vx.fastpath.firstwave import import_asyncio\n"
        "asyncio = import_asyncio()\n"
        "print(asyncio.base_events.ssl is sys.modules['ssl'])\n"
    )
    proc = py("-c", probe)
    assert proc.stdout.strip() == "True", proc.stderr


@pytest.mark.parametrize(
    "args, said",
    [
        (["--remote-only", "--cache=local:rw"], "`--cache=local:,remote:rw`"),
        (["--env-mode=loose"], "always strict"),
        (["--log-prefix=task"], "never interleaved"),
        (["--log-order=stream"], "never interleaves"),
        (["--output-style=static"], "`--output-logs`"),
    ],
)
def test_issue17_flags_turbo_and_nx_users_type_get_what_to_write(repo, args, said):
    """No misleading did-you-mean (`--remote-only` is not `--report-file`, `--base` not `--cache`)."""
    repo.write(
        npm_workspace(
            {"app": {"tasks": {"build": build_task(deps=())}, "files": {"src/a.js": "a"}}}
        )
    ).commit()
    res = repo.vx("run", "build", *args)
    assert res.code == 2 and said in res.err and "did you mean" not in res.err, res.err


def test_issue17_nx_spellings_that_vx_reads_or_names(repo):
    """`-p a,b` is Nx's list of projects; `app:build` is Nx's `app#build`, in any workspace."""
    repo.write(
        npm_workspace(
            {
                name: {"tasks": {"build": build_task(deps=())}, "files": {"src/a.js": name}}
                for name in ("app", "lib", "other")
            }
        )
    ).commit()
    listed = repo.vx("run", "build", "-p", "app,lib")
    assert listed.code == 0 and sorted(listed.statuses()) == ["app#build", "lib#build"], listed.err
    nx = repo.vx("run", "app:build")
    assert nx.code == 0 and sorted(nx.statuses()) == ["app#build"], nx.err
    assert repo.vx("help", "ls").out == repo.vx("help", "show").out


@pytest.mark.feature("CLI-58")
@pytest.mark.parametrize(
    "term, painted, never",
    [
        ("COLORTERM=truecolor TERM=xterm-256color", "38;2;", "38;5;"),
        ("COLORTERM= TERM=xterm-256color", "38;5;", "38;2;"),
        ("COLORTERM= TERM=xterm", "\x1b[9", "38;"),
        ("COLORTERM= TERM=xterm NO_COLOR=1", None, "\x1b[3"),
    ],
)
def test_colour_depth_follows_the_terminal(repo, pane, term, painted, never):
    """On a real terminal vx paints in the colours it says it shows: truecolour for
    COLORTERM=truecolor, xterm's 256 for a *-256color TERM, the 16 ANSI colours else, none
    under NO_COLOR."""
    repo.write(one_build()).commit()
    env = f"-u FORCE_COLOR -u GITHUB_ACTIONS -u TERM_PROGRAM {term}"
    p = pane(vx_in_shell(repo, "run", "build", env=env), repo.root)
    assert wait_for_file(repo.root / "code.txt", p) == "0"
    shown = p.screen(escapes=True)
    assert "1 task" in shown and never not in shown, shown
    assert painted is None or painted in shown, shown
