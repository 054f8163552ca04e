"""Adversarial tasks against the sandbox, each with real bwrap and strace: a task that tries to
get out (or to hide what it did) and what stops it. Each test names the escape it closes."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from support.commands import needs
from support.sandbox import app, hello_origin, sandboxed, violation_lines
from support.workspace import vx_env

pytestmark = needs("bwrap", "strace", "node")


# ---------------------------------------------------------------- other syscall ABIs

# i386 system calls through `int $0x80`: socket(AF_UNIX), connect, write. Built either as a
# 32-bit binary or as an x86-64 one (static, not PIE, so every pointer fits in 32 bits).
I386_CLIENT = r"""
static long sys32(long nr, long a, long b, long c) {
    long r;
    __asm__ volatile ("int $0x80" : "=a"(r) : "a"(nr), "b"(a), "c"(b), "d"(c) : "memory");
    return r;
}
static struct { unsigned short family; char path[108]; } addr = {1, SOCK_PATH};
static void say(const char *s) { long n = 0; while (s[n]) n++; sys32(4, 1, (long)s, n); }
void _start(void) {
    long fd = sys32(359, 1, 1, 0);
    if (fd < 0) { say("socket refused\n"); sys32(1, 3, 0, 0); }
    if (sys32(362, fd, (long)&addr, sizeof addr) < 0) { say("connect failed\n"); sys32(1, 4, 0, 0); }
    sys32(4, fd, (long)"pwned", 5);
    say("connected\n");
    sys32(1, 0, 0, 0);
}
"""


def build_i386_client(tmp_path: Path, sock: str, out: Path) -> str:
    """Compile the client, 32-bit if gcc can, else x86-64 with i386 calls; skip if neither builds."""
    if shutil.which("gcc") is None or os.uname().machine != "x86_64":
        pytest.skip("needs gcc on x86-64 to build an i386 system-call probe")
    src = tmp_path / "client.c"
    src.write_text(I386_CLIENT)
    common = [
        "-static",
        "-nostdlib",
        "-fno-stack-protector",
        "-fno-pie",
        "-no-pie",
        "-O1",
        f'-DSOCK_PATH="{sock}"',
    ]
    for flavour in (["-m32"], ["-m64"]):
        built = subprocess.run(
            ["gcc", *flavour, *common, str(src), "-o", str(out)], capture_output=True
        )
        if built.returncode == 0:
            return flavour[0]
    pytest.skip(
        f"gcc builds neither a 32-bit nor an int-0x80 x86-64 binary: {built.stderr.decode()[-300:]}"
    )


@pytest.mark.feature("SB-09")
def test_an_i386_syscall_cannot_open_a_unix_socket_to_a_host_daemon(repo, tmp_path):
    home = Path(
        tempfile.mkdtemp(prefix="vx-daemon-", dir="/var/tmp")
    )  # outside /tmp: visible inside
    try:
        sock = str(home / "daemon.sock")
        daemon = socket.socket(socket.AF_UNIX)
        daemon.bind(sock)
        daemon.listen(4)
        daemon.setblocking(False)
        app(repo, {"t": sandboxed("./client; echo exit=$?", read=["client"])})
        build_i386_client(tmp_path, sock, repo.root / "packages/app/client")
        res = repo.vx("run", "t", cwd="packages/app")
        assert "connected" not in res.out, res.out
        assert "exit=159" in res.out, res.out  # 128 + SIGSYS: killed at its first foreign call
        with pytest.raises(BlockingIOError):
            daemon.accept()  # nobody reached the daemon
        daemon.close()
    finally:
        shutil.rmtree(home, ignore_errors=True)


# ---------------------------------------------------------------- a grant over the task's own config


def test_a_file_glob_at_the_project_root_cannot_rewrite_config_manifest_lockfile_or_read_grants(
    repo,
):
    # allow.write ["*.tsbuildinfo"] binds the project directory: the task's own config, its
    # package.json and its read grants must stay read-only, and a new config file must not stay.
    attack = (
        "for f in vx.config.json package.json src/a.js; do (echo '{}' > $f) 2>/dev/null && echo wrote $f; done; "
        "echo '{}' > vx.config.jsonc && echo created vx.config.jsonc; echo x > a.tsbuildinfo; true"
    )
    app(repo, {"t": sandboxed(attack, read=["src/**"], write=["*.tsbuildinfo"])})
    config = (repo.root / "packages/app/vx.config.json").read_text()
    manifest = (repo.root / "packages/app/package.json").read_text()
    res = repo.vx("run", "t", cwd="packages/app")
    assert "\nwrote " not in res.out, res.out
    assert (repo.root / "packages/app/vx.config.json").read_text() == config
    assert (repo.root / "packages/app/package.json").read_text() == manifest
    assert (repo.root / "packages/app/src/a.js").read_text() == "a\n"
    assert not (repo.root / "packages/app/vx.config.jsonc").exists()  # created, then removed
    assert (
        repo.root / "packages/app/a.tsbuildinfo"
    ).read_text() == "x\n"  # the grant itself still works
    assert res.code == 1
    none = "none: a task never writes vx config files, package.json, lockfiles or install settings"
    assert violation_lines(res.out) == [
        f"│ write packages/app/package.json  → {none}",
        '│ write packages/app/src/a.js  → allow.write "src/a.js"',
        f"│ write packages/app/vx.config.json  → {none}",
        f"│ write packages/app/vx.config.jsonc  → {none}",
    ]


def test_a_write_grant_that_names_a_manifest_is_refused_before_anything_runs(repo):
    app(repo, {"t": sandboxed("touch ran", write=["*.json"])})
    res = repo.vx("run", "t", cwd="packages/app")
    assert res.code == 2, res.out + res.err
    assert "write grant `*.json` would make packages/app/vx.config.json writable" in res.err
    assert "tasks.t.exec.sandbox.allow.write[0]" in res.err


# ---------------------------------------------------------------- output links to what the task may not read


@pytest.mark.feature("LC-08")
def test_an_output_link_to_a_file_the_task_could_not_read_is_never_saved_or_restored(
    repo,
):
    cmd = "mkdir -p dist && echo ok > dist/ok.js && ln -sf ../../other/secret.txt dist/leak"
    app(
        repo,
        {"build": sandboxed(cmd, read=["src/**"], write=["dist/"], cache=["dist/**"])},
        other={"files": {"secret.txt": "TOPSECRET\n"}},
    )
    first = repo.vx("run", "build", cwd="packages/app")
    assert first.code == 0, first.out + first.err
    second = repo.vx("run", "build", cwd="packages/app")
    leak = repo.root / "packages/app/dist/leak"
    assert (
        leak.is_symlink() and os.readlink(leak) == "../../other/secret.txt"
    )  # never restored as the secret
    assert second.task("app#build")["cache"] == "miss"  # nothing was saved, so nothing is restored
    assert (
        "not saved to the cache: refused output packages/app/dist/leak: a symlink to packages/other/secret.txt, "
        "which is not one of the task's outputs" in first.out + first.err
    )


# ---------------------------------------------------------------- a created grant under a concurrent task


@pytest.mark.feature("SB-04")
def test_a_write_grant_vx_created_lives_until_the_last_task_using_it_ends(repo):
    # `a` creates gen/ (b starts only once a runs), then ends while `b` still has to write gen/
    # (b waits for `c`, which runs only after a ended): the empty gen/ must survive a's end.
    tasks = {
        "a": sandboxed(
            "touch sync/a-started; until [ -e sync/b-started ]; do sleep 0.01; done",
            write=["gen/", "sync/"],
        ),
        "after-a-started": sandboxed(
            "until [ -e sync/a-started ]; do sleep 0.01; done", write=["sync/"]
        ),
        "b": {
            **sandboxed(
                "touch sync/b-started; until [ -e sync/c-ran ]; do sleep 0.01; done; echo x > gen/out",
                write=["gen/", "sync/"],
            ),
            "dependsOn": ["after-a-started"],
        },
        "c": {**sandboxed("touch sync/c-ran", write=["sync/"]), "dependsOn": ["a"]},
        "all": {"dependsOn": ["a", "b", "c"]},
    }
    app(repo, tasks, files={"sync/.keep": ""})
    res = repo.vx("run", "all", "--concurrency=3", cwd="packages/app")
    assert res.code == 0, res.out + res.err
    assert (repo.root / "packages/app/gen/out").read_text() == "x\n"


# ---------------------------------------------------------------- the task erasing its own trace

PTRACE_PROBE = (
    "import ctypes, os\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "for pid in sorted(int(p) for p in os.listdir('/proc') if p.isdigit() and int(p) != os.getpid()):\n"
    "    comm = open(f'/proc/{pid}/comm').read().strip()\n"
    "    r = libc.ptrace(16, pid, 0, 0)\n"  # PTRACE_ATTACH
    "    print('ptrace', comm, 'attached' if r == 0 else os.strerror(ctypes.get_errno()))\n"
)


@pytest.mark.feature("SB-13")
def test_the_task_cannot_empty_its_trace_or_ptrace_the_sandbox(repo):
    # Read an ungranted file, then try every way back to the trace: bwrap's pid 1 and every fd
    # of every process in view, and ptrace of each of them. The read must still be reported.
    cmd = (
        "cat fixture.json 2>/dev/null; for f in /proc/1/fd/0 /proc/[0-9]*/fd/[0-9]*; do "
        '(: > "$f") 2>/dev/null; done; '
        f"python3 -c \"{PTRACE_PROBE}\"; ls /proc/*/comm | xargs cat | sort -u | tr '\\n' ' '; echo"
    )
    app(
        repo,
        {"t": sandboxed(cmd, read=["src/**"], cache=["dist/**"])},
        files={"fixture.json": "{}"},
    )
    res = repo.vx("run", "t", cwd="packages/app")
    assert violation_lines(res.out) == [
        '│ read  packages/app/fixture.json  → allow.read "fixture.json"'
    ], res.out
    assert res.code == 1
    probes = [line for line in res.out.splitlines() if line.startswith("ptrace ")]
    assert probes and all(not line.endswith("attached") for line in probes), res.out
    assert "strace" not in res.out.split("echo\n", 1)[-1]  # the tracer is not in the task's view
    assert repo.vx("run", "t", cwd="packages/app").task("app#t")["cache"] == "miss"


@pytest.mark.feature("SB-13")
def test_an_emptied_trace_fails_the_task_instead_of_passing_it(repo, tmp_path):
    (tmp_path / "bin").mkdir()
    wrapper = tmp_path / "bin" / "strace"  # the real strace, then the trace emptied behind it
    wrapper.write_text(
        f"#!/bin/sh\nreal={shutil.which('strace')}\n"
        'case " $* " in *" -DD "*) ;; *) exec "$real" "$@";; esac\n'
        'out=; prev=; for a in "$@"; do [ "$prev" = -o ] && out=$a; prev=$a; done\n'
        '"$real" "$@"; rc=$?; : > "$out"; exit $rc\n'
    )
    wrapper.chmod(0o755)
    app(repo, {"t": sandboxed("echo ran", cache=["dist/**"])})
    res = repo.vx("run", "t", cwd="packages/app", env={"VX_STRACE": str(wrapper)})
    assert res.code == 1, res.out + res.err
    assert "the sandbox's trace is incomplete" in res.out + res.err


# ---------------------------------------------------------------- other tasks' temp dirs, the cache dir


@pytest.mark.feature("SB-15")
def test_a_task_sees_neither_another_tasks_temp_dir_nor_an_outside_cache_dir(repo):
    outside = Path(
        tempfile.mkdtemp(prefix="vx-tmpdir-", dir="/var/tmp")
    )  # TMPDIR outside /tmp: visible
    try:
        cache = outside / "cache"
        tasks = {
            "a": sandboxed(
                'echo TOP""SECRET > "$TMPDIR/secret"; touch sync/a-wrote; '
                "until [ -e sync/b-done ]; do sleep 0.01; done",
                write=["sync/"],
            ),
            "b": sandboxed(
                f"until [ -e sync/a-wrote ]; do sleep 0.01; done; "
                f"find {outside} -name secret 2>/dev/null | xargs cat 2>/dev/null; "
                f"find {cache} -type f 2>/dev/null | wc -l | sed 's/^/cache files: /'; touch sync/b-done",
                write=["sync/"],
            ),
            "all": {"dependsOn": ["a", "b"]},
            "c": sandboxed("echo c", cache=["dist/**"]),
        }
        app(repo, tasks, files={"sync/.keep": ""})
        env = {"TMPDIR": str(outside), "VX_CACHE_DIR": str(cache)}
        assert repo.vx("run", "c", cwd="packages/app", env=env).code == 0  # something in the cache
        assert any(p.is_file() for p in cache.rglob("*"))
        res = repo.vx("run", "all", "--concurrency=2", cwd="packages/app", env=env)
        assert res.code == 0, res.out + res.err
        assert "TOPSECRET" not in res.out
        assert "cache files: 0" in res.out
    finally:
        shutil.rmtree(outside, ignore_errors=True)


# ---------------------------------------------------------------- network: per task, by address, no unix sockets


@pytest.fixture
def origin():
    with hello_origin() as port:
        yield port


needs_network_tools = needs("socat", "curl")


@pytest.mark.feature("SB-08")
@needs_network_tools
def test_a_task_reaches_only_its_own_hosts_not_another_tasks(repo, origin):
    curl = (
        f"curl -sS --noproxy '' http://127.0.0.1:{origin}/"  # through the proxy, even for loopback
    )
    tasks = {
        "a": sandboxed(f"{curl}a; echo", network=["127.0.0.1"]),
        "b": sandboxed(f"{curl}b; echo; exit 0", network=["registry.npmjs.org"]),
        "all": {"dependsOn": ["a", "b"]},
    }
    app(repo, tasks)
    res = repo.vx("run", "all", "--continue", cwd="packages/app")
    assert "hello /a" in res.out and "hello /b" not in res.out, res.out
    assert res.task("app#a").get("sandboxViolations", []) == []
    assert res.task("app#b")["sandboxViolations"] == [
        {"kind": "network", "path": f"127.0.0.1:{origin}", "grant": 'allow.network "127.0.0.1"'}
    ]


@pytest.mark.feature("SB-08")
@needs_network_tools
def test_a_denied_address_is_denied_whatever_name_reaches_it(repo, origin):
    cmd = f"curl -sS http://localhost:{origin}/by-name; echo; exit 0"
    app(
        repo,
        {
            "t": {
                "exec": {
                    "command": cmd,
                    "sandbox": {
                        "allow": {"network": ["localhost"]},
                        "deny": {"network": ["127.0.0.1"]},
                    },
                }
            }
        },
    )
    res = repo.vx("run", "t", cwd="packages/app")
    assert "hello /by-name" not in res.out, res.out
    assert res.task("app#t")["sandboxViolations"] == [
        {
            "kind": "network",
            "path": f"localhost:{origin}",
            "grant": 'denied by deny.network "127.0.0.1"',
        }
    ]


@pytest.mark.feature("SB-09")
@needs_network_tools
def test_a_task_with_network_hosts_still_cannot_open_a_unix_socket(repo, origin):
    home = Path(tempfile.mkdtemp(prefix="vx-daemon-", dir="/var/tmp"))
    try:
        sock = str(home / "daemon.sock")
        daemon = socket.socket(socket.AF_UNIX)
        daemon.bind(sock)
        daemon.listen(4)
        daemon.setblocking(False)
        probe = f"import socket; s = socket.socket(socket.AF_UNIX); s.connect('{sock}'); print('connected')"
        cmd = f'curl -sS http://127.0.0.1:{origin}/net; echo; python3 -c "{probe}" 2>&1 | tail -1'
        app(repo, {"t": sandboxed(cmd, network=["127.0.0.1"])})
        res = repo.vx("run", "t", cwd="packages/app")
        assert "hello /net" in res.out, res.out + res.err  # the bridge still works
        assert "PermissionError: [Errno 1] Operation not permitted" in res.out
        with pytest.raises(BlockingIOError):
            daemon.accept()
        daemon.close()
    finally:
        shutil.rmtree(home, ignore_errors=True)


# ---------------------------------------------------------------- refused lookups


@pytest.mark.feature("SB-05")
def test_a_tool_that_stats_before_it_opens_still_names_the_missing_grant(repo):
    # cp and `test -f` stat first, node's require stats its candidates: none of them opens the
    # hidden file, so only the refused lookup can show what was missing.
    cmd = (
        "test -f fixture.json || echo 'no fixture'; cp data/in.txt /dev/null 2>/dev/null; "
        "node -e \"try { require('./lib/helper.js') } catch (e) { console.log(e.code) }\"; "
        "test -f not-there.json; true"
    )
    files = {"fixture.json": "{}", "data/in.txt": "x", "lib/helper.js": "module.exports = 1\n"}
    app(repo, {"t": sandboxed(cmd, read=["src/**", "package.json"])}, files=files)
    res = repo.vx("run", "t", cwd="packages/app")
    assert "no fixture" in res.out and "MODULE_NOT_FOUND" in res.out, res.out
    assert violation_lines(res.out) == [
        '│ read  packages/app/data/in.txt  → allow.read "data/in.txt"',
        '│ read  packages/app/fixture.json  → allow.read "fixture.json"',
        '│ read  packages/app/lib/helper.js  → allow.read "lib/helper.js"',
    ]


# ---------------------------------------------------------------- smaller ones


@pytest.mark.feature("LG-03")
def test_verify_counts_a_read_through_a_read_write_open(repo):
    script = (
        "import os; f = open('config.txt', 'r+'); data = f.read(); os.makedirs('dist', exist_ok=True); "
        "open('dist/out.txt', 'w').write(data)"
    )
    task = {
        "exec": {"command": f'python3 -c "{script}"'},
        "cache": {"inputs": {"files": ["src/**"]}, "outputs": {"files": ["dist/**"]}},
    }
    app(repo, {"build": task}, files={"config.txt": "v1\n"})
    res = repo.vx("run", "app#build", "--verify=inputs")
    assert res.code == 1, res.out + res.err
    assert '  config.txt  add cache.inputs.files: ["config.txt"]' in res.out.splitlines(), res.out


def test_the_matches_nothing_warning_comes_before_the_task_and_never_advises_the_whole_project(
    repo,
):
    cmd = "echo task-ran; mkdir .0123456789abcdef-00000000.tmp 2>&1 | tail -1; true"
    app(repo, {"t": sandboxed(cmd, read=["."], write=[".*.tmp/**"])})
    both = subprocess.run(
        [sys.executable, "-m", "vx", "run", "t"],
        cwd=repo.root / "packages/app",
        env=vx_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=60,
    ).stdout  # one pipe: the order vx wrote in
    warning = next(
        line
        for line in both.splitlines()
        if "the write grant .*.tmp/** matches nothing yet" in line
    )
    assert both.index(warning) < both.index("\ntask-ran"), both
    assert "./**" not in warning and "grant that, or under its TMPDIR" in warning


def test_a_scratch_glob_under_a_missing_directory_needs_no_grant_for_its_parent(
    repo,
):  # seed 0.0.217
    cmd = "mkdir -p build/.0123456789abcdef-00000000.tmp && echo x > build/.0123456789abcdef-00000000.tmp/f"
    app(repo, {"t": sandboxed(cmd, read=["src/**"], write=["build/.*.tmp/**", "dist/"])})
    res = repo.vx("run", "t", cwd="packages/app")
    assert res.code == 0, res.out + res.err
    assert violation_lines(res.out) == []


def test_an_outside_write_grant_without_a_slash_is_a_directory_and_its_parent_stays_read_only(
    repo, tmp_path
):
    home = tmp_path / "home"
    (home / ".cache").mkdir(parents=True)
    cmd = (
        "echo blob > ~/.cache/tool/blob && echo in-tool; "
        "(echo x > ~/.cache/beside) 2>/dev/null || echo parent-read-only"
    )
    app(repo, {"t": sandboxed(cmd, write=["~/.cache/tool"])})
    res = repo.vx("run", "t", cwd="packages/app", env={"HOME": str(home)})
    assert "in-tool" in res.out and "parent-read-only" in res.out, res.out + res.err
    assert (home / ".cache/tool/blob").read_text() == "blob\n"
    assert not (home / ".cache/beside").exists()


@pytest.mark.feature("KEY-17")
def test_bun_temp_dirs_with_any_characters_are_never_inputs(repo):
    task = {
        "exec": {"command": "mkdir -p dist && echo o > dist/o"},
        "cache": {"inputs": {"files": ["**"]}, "outputs": {"files": ["dist/**"]}},
    }
    app(repo, {"build": task})
    assert repo.vx("run", "build", cwd="packages/app").code == 0
    temp = repo.root / "packages/app/.zZ_9zZ_9zZ_9zZ_9-zZ_9zZ_9.tmp"
    temp.mkdir()
    (temp / "blob").write_text("bun's scratch")
    assert repo.vx("run", "build", cwd="packages/app").task("app#build")["cache"] != "miss"


def test_a_package_json_inside_an_output_directory_is_a_plain_output(repo):
    # Bundlers write dist/package.json ({"type": "module"}): only the project's and the root's
    # own config files are protected, not files of those names under a write grant.
    cmd = 'mkdir -p dist && echo \'{"type": "module"}\' > dist/package.json'
    app(repo, {"t": sandboxed(cmd, write=["dist/"])})
    for _ in range(2):  # the second run rewrites the file the first left
        res = repo.vx("run", "t", cwd="packages/app")
        assert res.code == 0, res.out + res.err
    assert (repo.root / "packages/app/dist/package.json").read_text() == '{"type": "module"}\n'


# A task that looks for a process in its view it could take over through /proc/<pid>/mem (seccomp
# cannot see the path, and ptrace itself is refused): writable memory, and fewer seccomp filters
# than the task has itself — a process outside the filter, which can still open unix sockets.
MEM_PROBE = r"""
import os
def filters(pid):
    return next(int(l.split()[1]) for l in open(f'/proc/{pid}/status') if l.startswith('Seccomp_filters:'))
me, mine = os.getpid(), filters('self')
for pid in sorted(int(p) for p in os.listdir('/proc') if p.isdigit() and int(p) != me):
    try:
        comm = open(f'/proc/{pid}/comm').read().strip()
        start = int(next(open(f'/proc/{pid}/maps')).split('-')[0], 16)
        with open(f'/proc/{pid}/mem', 'r+b', buffering=0) as mem:
            mem.seek(start); byte = mem.read(1); mem.seek(start); mem.write(byte)
    except OSError as exc:
        print('probe', pid, comm if 'comm' in dir() else '?', 'refused', exc.errno)
        continue
    print('probe', pid, comm, 'writable', 'UNFILTERED' if filters(pid) < mine else 'filtered')
"""


@pytest.mark.feature("SB-08", "SB-09")
@needs_network_tools
def test_no_process_in_a_networked_tasks_view_is_outside_its_filter(repo, origin):
    # The bridges (socat) and bwrap's pid 1 once ran in the task's pid namespace without the
    # filter: writing their memory would have been a way to a unix socket.
    cmd = (
        f"curl -sS http://127.0.0.1:{origin}/net; echo; python3 probe.py; "
        "cat /proc/[0-9]*/comm | sort -u | tr '\\n' ' '; echo"
    )
    app(
        repo,
        {"t": sandboxed(cmd, read=["probe.py"], network=["127.0.0.1"], localBinding=[free_port()])},
        files={"probe.py": MEM_PROBE},
    )
    res = repo.vx("run", "t", cwd="packages/app")
    assert "hello /net" in res.out, res.out + res.err  # the bridge still works
    probes = [line for line in res.out.splitlines() if line.startswith("probe ")]
    assert probes, res.out  # bwrap's pid 1 at least is in view
    assert not [line for line in probes if "UNFILTERED" in line], res.out
    assert "socat" not in res.out.splitlines()[-4], (
        res.out
    )  # the bridges are not in the task's view


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
