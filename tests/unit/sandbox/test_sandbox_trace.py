"""The strace parser (sandbox.md §4.9, pitfalls 12-17): split calls, -xx escaping, per-pid cwd.

Lines are built here with the grammar strace 6.1 prints under `-f -qq -y -xx`; the last test
runs the real strace over a real shell.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from vx.sandbox.trace import Access, TraceParser, parse, strace_argv, unhex

CWD = "/w/pkg"


def hx(text: str) -> str:
    return "".join(f"\\x{b:02x}" for b in os.fsencode(text))


def q(text: str) -> str:
    return f'"{hx(text)}"'


def fd(path: str, n: str = "AT_FDCWD") -> str:
    return f"{n}<{hx(path)}>"


def test_unhex_round_trips_quotes_newlines_utf8_and_angle_brackets():
    for name in ['a"b.js', "new\nline", "café.txt", "a>b<c.js", ") = 3"]:
        assert unhex(hx(name)) == name


def test_openat_read_write_list_and_probe_with_canonical_path():
    lines = [
        f"5 openat({fd(CWD)}, {q('src/a.js')}, O_RDONLY|O_CLOEXEC) = 3<{hx('/w/pkg/src/a.js')}>",
        f"5 openat({fd(CWD)}, {q('dist/o.js')}, O_WRONLY|O_CREAT|O_TRUNC, 0666) = 4<{hx('/w/pkg/dist/o.js')}>",
        f"5 openat({fd(CWD)}, {q('src')}, O_RDONLY|O_NONBLOCK|O_CLOEXEC|O_DIRECTORY) = 5<{hx('/w/pkg/src')}>",
        f"5 openat({fd(CWD)}, {q('x')}, O_RDONLY|O_PATH) = 6<{hx('/w/pkg/x')}>",
        f"5 openat({fd(CWD)}, {q('../other.txt')}, O_RDONLY) = -1 ENOENT (No such file or directory)",
        f"5 openat({fd(CWD)}, {q('/etc/x')}, O_WRONLY|O_CREAT, 0666) = -1 EROFS (Read-only file system)",
    ]
    got = parse(lines, CWD)
    assert [(a.kind, a.path, a.errno, a.real) for a in got] == [
        ("read", "/w/pkg/src/a.js", None, "/w/pkg/src/a.js"),
        ("write", "/w/pkg/dist/o.js", None, "/w/pkg/dist/o.js"),
        ("list", "/w/pkg/src", None, "/w/pkg/src"),
        ("probe", "/w/pkg/x", None, "/w/pkg/x"),
        ("read", "/w/other.txt", "ENOENT", None),
        ("write", "/etc/x", "EROFS", None),
    ]


def test_symlink_target_is_the_real_path():
    line = f"7 openat({fd(CWD)}, {q('src/link.js')}, O_RDONLY) = 3<{hx('/w/other/secret.txt')}>"
    (access,) = parse([line], CWD)
    assert access.path == "/w/pkg/src/link.js" and access.real == "/w/other/secret.txt"


def test_unfinished_and_resumed_calls_interleave_across_pids_and_padding():
    lines = [
        f"10 openat({fd(CWD)}, {q('a.js')}, O_RDONLY <unfinished ...>",
        f"11 openat({fd(CWD)}, {q('b.js')}, O_RDONLY <unfinished ...>",
        f"11 <... openat resumed>) = 4<{hx('/w/pkg/b.js')}>",
        "10 <... openat resumed>)               = -1 ENOENT (No such file or directory)",
    ]
    got = parse(lines, CWD)
    assert [(a.pid, a.path, a.errno) for a in got] == [
        (11, "/w/pkg/b.js", None),
        (10, "/w/pkg/a.js", "ENOENT"),
    ]


def test_legacy_calls_resolve_against_a_tracked_cwd_inherited_through_clone():
    # `mkdir -p dist/q` style: chdir(".."), mkdir, chdir, fchdir; and a child of a vfork.
    lines = [
        f"2 chdir({q('..')}) = 0",
        f"2 mkdir({q('dist')}, 0777) = 0",
        f"2 chdir({q('dist')}) = 0",
        "2 vfork( <unfinished ...>",
        "2 <... vfork resumed>)   = 9",
        f"9 mkdir({q('q')}, 0777) = 0",
        f"2 fchdir(3<{hx('/w/pkg/src')}>) = 0",
        f"2 unlink({q('old.js')}) = 0",
        f"2 mkdir({q('/w/dist')}, 0777) = -1 EEXIST (File exists)",
    ]
    got = parse(lines, CWD)
    assert [(a.kind, a.path) for a in got] == [
        ("write", "/w/dist"),
        ("write", "/w/dist/q"),
        ("write", "/w/pkg/src/old.js"),
    ]


def test_rename_removes_the_old_and_writes_the_new_and_at_calls_use_their_dirfds():
    lines = [
        f"3 renameat2({fd('/w/pkg/dist', '4')}, {q('t.tmp')}, {fd('/w/pkg/dist', '4')}, {q('o.js')}, 0) = 0",
        f"3 rename({q('a')}, {q('/tmp/b')}) = -1 EXDEV (Invalid cross-device link)",
        f"3 unlinkat({fd('/w/pkg/dist/sub', '5')}, {q('q')}, AT_REMOVEDIR) = 0",
        f"3 symlinkat({q('../x')}, {fd(CWD)}, {q('lnk')}) = 0",
        f"3 execve({q('/usr/bin/node')}, [{q('node')}, {q('t.js')}], 0x1 /* 3 vars */) = 0",
    ]
    got = parse(lines, CWD)
    assert [(a.kind, a.path, a.errno) for a in got] == [
        ("write", "/w/pkg/dist/t.tmp", None),
        ("write", "/w/pkg/dist/o.js", None),
        ("write", "/w/pkg/a", "EXDEV"),
        ("write", "/tmp/b", "EXDEV"),
        ("write", "/w/pkg/dist/sub/q", None),
        ("write", "/w/pkg/lnk", None),
        ("exec", "/usr/bin/node", None),
    ]


@pytest.mark.parametrize(
    "line",
    [
        "4 +++ killed by SIGKILL +++",
        "4 +++ exited with 0 +++",
        "4 --- SIGCHLD {si_signo=SIGCHLD} ---",
        "4 io_uring_setup(256, {flags=0}) = -1 ENOSYS (Function not implemented) (INJECTED)",
        f"4 openat({fd(CWD)}, {q('a')}, O_RDONLY) = ?",
        f"4 openat({fd(CWD)}, {q('a')}, O_RDONLY) = -1 ERESTARTSYS (To be restarted if SA_RESTART is set)",
        "garbage",
    ],
)
def test_noise_yields_nothing(line):
    assert parse([line], CWD) == []


def test_at_fdcwd_decoration_sets_the_cwd_for_later_legacy_calls():
    p = TraceParser(CWD)
    p.line(f"6 openat({fd('/w/pkg/src')}, {q('a')}, O_RDONLY) = -1 ENOENT (x)")
    (access,) = p.line(f"6 unlink({q('b')}) = 0")
    assert access == Access(6, "write", "unlink", "/w/pkg/src/b", None, None)


@pytest.mark.skipif(not os.path.exists("/usr/bin/strace"), reason="strace is installed by dev/test")
def test_real_strace_over_a_shell_that_cds_and_makes_dirs(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.js").write_text("x")
    trace = tmp_path.parent / "trace"
    script = "(cd src && cat a.js >/dev/null); mkdir -p out/q; echo y > out/q/f; cat missing 2>/dev/null; true"
    subprocess.run(
        strace_argv("strace", str(trace)) + ["/bin/sh", "-c", script], cwd=tmp_path, check=True
    )
    text = trace.read_text()
    got = {(a.kind, a.path, a.errno) for a in parse(text.splitlines(), str(tmp_path))}
    assert ("read", f"{tmp_path}/src/a.js", None) in got
    assert ("write", f"{tmp_path}/out/q", None) in got
    assert ("write", f"{tmp_path}/out/q/f", None) in got
    assert ("read", f"{tmp_path}/missing", "ENOENT") in got


@pytest.mark.skipif(not os.path.exists("/usr/bin/strace"), reason="strace is installed by dev/test")
def test_the_openat_fast_path_agrees_with_the_general_parser(tmp_path, monkeypatch):
    import re

    from vx.sandbox import trace as trace_module

    (tmp_path / "a b").mkdir()
    (tmp_path / "a b" / "é.js").write_text("x")
    trace = tmp_path.parent / "trace"
    script = (
        "cat 'a b/é.js' missing './a b/é.js' 'a b/../a b//é.js' .hidden 2>/dev/null; "
        "ls 'a b' >/dev/null; echo y > out.txt; true"
    )  # plain names, and ones that need normpath
    subprocess.run(
        strace_argv("strace", str(trace)) + ["/bin/sh", "-c", script], cwd=tmp_path, check=True
    )
    lines = trace.read_text().splitlines()
    fast = parse(lines, str(tmp_path))
    assert any(trace_module._OPENAT.match(line) for line in lines)
    monkeypatch.setattr(trace_module, "_OPENAT", re.compile(r"(?!)"))
    assert parse(lines, str(tmp_path)) == fast
    paths = [(a.kind, a.path) for a in fast]
    assert (
        paths.count(("read", f"{tmp_path}/a b/é.js")) == 3
        and ("read", f"{tmp_path}/.hidden") in paths
    )


def test_an_open_by_file_handle_is_named_by_the_path_the_handle_was_made_of():
    """strace decorates no fd open_by_handle_at returns; the handle's bytes tie it to the path
    name_to_handle_at made it of. A handle the trace never saw made is an unnamed access."""
    handle = 'handle_type=1, f_handle="\\x16\\xe2\\x80\\x00"'
    lines = [
        f'7 name_to_handle_at(AT_FDCWD</w/app>, "../lib/x.js", {{handle_bytes=128 => 4, {handle}}}, [27], 0) = 0\n',
        f"7 open_by_handle_at(3</w>, {{handle_bytes=4, {handle}}}, O_RDONLY) = 4\n",
        '7 open_by_handle_at(3</w>, {handle_bytes=4, handle_type=1, f_handle="\\x01"}, O_RDONLY) = 5\n',
        f"7 open_by_handle_at(3</w>, {{handle_bytes=4, {handle}}}, O_RDONLY) = -1 ESTALE (Stale file handle)\n",
    ]
    assert parse(lines, "/w/app") == [
        Access(7, "read", "open_by_handle_at", "/w/lib/x.js", None, "/w/lib/x.js"),
        Access(7, "unnamed", "open_by_handle_at", "/w", None, None),
    ]
