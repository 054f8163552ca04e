"""vx installed as JavaScript teams install their tools (IN-01, IN-02): `dev/release` builds the
standalone vx and the npm tarballs, the real npm, pnpm, yarn 1 and bun install them into a fresh
generated workspace, and `npx vx` runs there with no Python reachable and no VX_ variable set.

The release build takes minutes: it is made once per state of its sources and kept in the test
cache (VX_TEST_CACHE, as npm_packages keeps its installs), keyed on every file it is made from.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support.npm_packages import cache_root, installed_or_skip, made_once
from support.processes import end, running, wait_for

ROOT = Path(__file__).resolve().parents[2]
SCOPE = "@vx-build"
PLATFORM = f"{SCOPE}/vx-linux-x64"
# What the no-Python PATH holds: the launcher's node, the package managers' npm/npx, vx's git and
# sh, and what pnpm's .bin shims call (dirname, sed, uname).
TOOLS = ("node", "npm", "npx", "git", "sh", "dirname", "sed", "uname")
# The first test to ask for the release builds it (minutes on a loaded machine): its bound.
BUILD_S = 1800
PMS = {"npm": "npm@11.19.1", "pnpm": "pnpm@9.15.9", "yarn": "yarn@1.22.22", "bun": "bun@1.2.5"}

pytestmark = pytest.mark.skipif(
    not (sys.platform == "linux" and os.uname().machine == "x86_64"),
    reason="the standalone build is made for linux-x64 only (docs/install.md)",
)


def _sources_digest() -> str:
    h = hashlib.sha256()
    files = [ROOT / "pyproject.toml", ROOT / "bin" / "vx", ROOT / "dev" / "release"]
    for folder in (ROOT / "src" / "vx", ROOT / "npm"):
        files += sorted(
            p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts
        )
    for path in files:
        h.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    import PyInstaller

    h.update(f"{PyInstaller.__version__} {sys.version}".encode())
    return h.hexdigest()[:16]


@pytest.fixture(scope="session")
def release() -> Path:
    """OUTDIR of `dev/release OUTDIR` for the checkout as it is, built once per state."""
    try:
        import PyInstaller  # noqa: F401
    except ImportError:
        pytest.skip("pyinstaller is not installed (pip install pyinstaller)")
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed")
    base = cache_root() / "release"
    out = base / _sources_digest()

    def make() -> None:
        temp = base / f"{out.name}.tmp-{os.getpid()}"
        shutil.rmtree(temp, ignore_errors=True)
        subprocess.run(
            [sys.executable, str(ROOT / "dev" / "release"), str(temp)],
            check=True,
            capture_output=True,
            timeout=BUILD_S,
        )
        for old in base.iterdir():  # one build kept: the sources' state before is stale
            if old.is_dir() and not old.name.endswith(f".tmp-{os.getpid()}"):
                shutil.rmtree(old, ignore_errors=True)
        temp.rename(out)
        (out / ".complete").write_text("")

    made_once(base / ".build.lock", (out / ".complete").exists, make)
    return out


def tarballs(release: Path) -> tuple[Path, Path]:
    """(the launcher's tarball, the platform package's)."""
    launcher = next(release.glob("vx-build-vx-[0-9]*.tgz"))
    return launcher, next(release.glob("vx-build-vx-linux-x64-*.tgz"))


def no_python_env(tmp: Path) -> dict[str, str]:
    """An environment whose PATH is a folder of links to TOOLS only, with a fresh HOME and no
    VX_ (or PYTHON) variable: a JavaScript team's machine that has no Python."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    for tool in TOOLS:
        found = shutil.which(tool)
        assert found, f"{tool} is not on PATH"
        (bin_dir / tool).symlink_to(found)
    assert shutil.which("python3", path=str(bin_dir)) is None
    assert shutil.which("python", path=str(bin_dir)) is None
    home = tmp / "home"
    home.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("VX_", "PYTHON", "CI")) and not k.lower().startswith("npm_config_")
    }
    env.update(PATH=str(bin_dir), HOME=str(home), NO_COLOR="1", npm_config_update_notifier="false")
    return env


def install_command(pm: str) -> list[str]:
    if pm == "npm":
        return ["npm", "install", "--no-audit", "--no-fund", "--loglevel=error"]
    if pm == "pnpm":
        return ["node", str(installed_or_skip("pnpm") / "bin" / "pnpm.cjs"), "install"]
    if pm == "yarn":
        return ["node", str(installed_or_skip("yarn") / "bin" / "yarn.js"), "install"]
    return [str(installed_or_skip("bun") / "bin" / "bun.exe"), "install"]


def workspace(tmp: Path, release: Path, pm: str, extra: dict | None = None) -> Path:
    """A generated workspace of six packages with the release's tarballs as vx, as a team would
    add an unpublished build: the launcher a devDependency, the platform package pinned to its
    tarball by the package manager's override (the launcher names it by version)."""
    ws = tmp / "ws"
    subprocess.run(
        [sys.executable, str(ROOT / "bench" / "gen_monorepo.py"), str(ws), "-n", "6", "-f", "2",
         "--tools", "vx", "--no-devdeps", "--package-manager", PMS[pm]],
        check=True,
        capture_output=True,
    )  # fmt: skip
    launcher, platform_tgz = tarballs(release)
    pin = {PLATFORM: f"file:{platform_tgz}"}
    manifest = json.loads((ws / "package.json").read_text())
    manifest["devDependencies"] = {f"{SCOPE}/vx": f"file:{launcher}"}
    manifest.update(overrides=pin, resolutions=pin, pnpm={"overrides": pin})
    (ws / "package.json").write_text(json.dumps(manifest, indent=2))
    if pm == "pnpm":
        (ws / "pnpm-workspace.yaml").write_text("packages:\n  - packages/*\n")
        (ws / ".npmrc").write_text("link-workspace-packages=true\n")  # the generator's "*" deps
    for rel, content in (extra or {}).items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(content if isinstance(content, str) else json.dumps(content))
    return ws


def run(argv: list[str], ws: Path, env: dict, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        argv, cwd=ws, env=env, capture_output=True, text=True, timeout=timeout,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


@pytest.mark.feature("IN-01", "IN-02")
@pytest.mark.timeout(BUILD_S + 600)
@pytest.mark.parametrize("pm", list(PMS))
def test_npx_vx_runs_the_standalone_build_installed_by_each_package_manager(release, tmp_path, pm):
    env = no_python_env(tmp_path)
    ws = workspace(tmp_path, release, pm)
    installed = run(install_command(pm), ws, env)
    assert installed.returncode == 0, installed.stdout + installed.stderr

    version = run(["npx", "vx", "--version"], ws, env)
    assert version.returncode == 0, version.stderr
    assert version.stdout.startswith("vx ") and "(npm, " in version.stdout, version.stdout
    assert str(ws / "node_modules") in version.stdout  # this repository's install ran
    info = run(["npx", "vx", "info"], ws, env)
    assert info.returncode == 0 and "installed" in info.stdout, info.stdout + info.stderr
    assert "npm, " in info.stdout.split("installed", 1)[1].splitlines()[0]

    caches = []
    for n in (1, 2):
        summary = tmp_path / f"summary-{n}.json"
        done = run(["npx", "vx", "run", "build", f"--summarize={summary}"], ws, env)
        assert done.returncode == 0, done.stdout + done.stderr
        tasks = json.loads(summary.read_text())["tasks"]
        assert len(tasks) == 6 and all(t["status"] == "success" for t in tasks), tasks
        caches.append({t["cache"] for t in tasks})
    assert caches[0] == {"miss"}
    assert caches[1] <= {"local", "up-to-date"}, caches  # every task a hit


LONG = {
    "packages/long/package.json": {"name": "long", "version": "1.0.0"},
    "packages/long/vx.config.json": {
        "tasks": {
            "long": {
                "exec": {
                    # It outlives the first signal, so vx waits out the grace and then kills
                    # it: a second signal would end vx at once, without the summary.
                    "command": "node -e \"process.on('SIGINT', () => {}); process.on('SIGTERM', () => {});"
                    "require('fs').writeFileSync('started', String(process.pid));"
                    'setTimeout(() => {}, 600000)"'
                },
            },
            "fail": {"exec": {"command": "exit 3"}},
        }
    },
}


@pytest.mark.feature("IN-02")
@pytest.mark.timeout(BUILD_S + 600)
def test_the_launcher_passes_signals_and_exit_codes_through(release, tmp_path):
    env = no_python_env(tmp_path)
    ws = workspace(tmp_path, release, "npm", LONG)
    installed = run(install_command("npm"), ws, env)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    launcher = str(ws / "node_modules" / ".bin" / "vx")
    binary = str(ws / "node_modules" / PLATFORM / "bin" / "vx")

    # Exit codes: the launcher's are the binary's own.
    for words in (["rnu"], ["run", "fail", "--filter", "long"], ["--version"]):
        direct = run([binary, *words], ws, env)
        through = run([launcher, *words], ws, env)
        assert through.returncode == direct.returncode, (words, through.stderr)
    assert run([launcher, "rnu"], ws, env).returncode == 2

    # A global vx defers to the repository's own install, as a global turbo does.
    prefix = tmp_path / "global"
    got = run(
        ["npm", "install", "-g", "--prefix", str(prefix), *map(str, tarballs(release))], ws, env
    )
    assert got.returncode == 0, got.stderr
    inside = run([str(prefix / "bin" / "vx"), "--version"], ws, env)
    assert f"{ws / 'node_modules'}{os.sep}" in inside.stdout, inside.stdout + inside.stderr
    outside = run([str(prefix / "bin" / "vx"), "--version"], tmp_path, env)
    assert f"{prefix}{os.sep}" in outside.stdout, outside.stdout + outside.stderr

    started = ws / "packages" / "long" / "started"
    cases = [  # (the command, the signal, to its whole group or its first process, the exits)
        ([launcher], signal.SIGINT, True, {130}),  # Ctrl-C: the whole foreground group
        ([launcher], signal.SIGTERM, False, {143}),  # a supervisor's stop: the launcher alone
        # npx ends itself by the SIGINT it got once vx is done: 130 in a shell's $? as well
        (["npx", "vx"], signal.SIGINT, True, {130, -signal.SIGINT}),
    ]
    summary = tmp_path / "summary.json"
    for command, sig, to_group, codes in cases:
        started.unlink(missing_ok=True)
        summary.unlink(missing_ok=True)
        proc = subprocess.Popen(
            [*command, "run", "long", "--filter", "long", f"--summarize={summary}"],
            cwd=ws,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its own group, as a shell's job is: Ctrl-C goes to all of it
        )
        try:
            wait_for(started.exists, "the long task to start", 120)
            task_pid = int(started.read_text())
            (os.killpg if to_group else os.kill)(proc.pid, sig)
            proc.wait(timeout=120)
            err = proc.stderr.read() if proc.stderr else ""
            assert proc.returncode in codes, (command, sig, proc.returncode, err)
            assert summary.exists(), (command, sig, err)  # one signal reached vx, not two
            wait_for(lambda pid=task_pid: not running(pid), "the task to be stopped", 60)
        finally:
            end(proc)


CTYPES_PLUGIN = """import sys


def plugin(options):
    def probe(argv, ctx):
        before = "ctypes" in sys.modules
        import ctypes

        # PyInstaller's hook: a library named by a path that is not there is looked for by its
        # base name among the build's own (libffi is bundled, beside libpython)
        ctypes.CDLL("/nowhere/libffi.so.8")
        print(f"imported at start: {before}; {ctypes.CDLL.__name__}")
        return 0

    return {"commands": {"probe": {"description": "ctypes in the build", "run": probe}}}
"""


@pytest.mark.feature("IN-01")
@pytest.mark.timeout(BUILD_S + 600)
def test_the_standalone_build_hooks_ctypes_on_its_first_import(release, tmp_path):
    """PyInstaller's bootstrap imported ctypes at every start (~4 ms of CPU) to hook CDLL; the
    build applies the same hook when something first imports ctypes (dev/release, LAZY_CTYPES):
    a plugin still finds a bundled library by its base name, and a start no longer pays."""
    env = no_python_env(tmp_path)
    ws = tmp_path / "ws"
    (ws / "tools").mkdir(parents=True)
    (ws / "package.json").write_text('{"name": "ws", "private": true}')
    (ws / "vx.workspace.json").write_text('{"plugins": ["tools.probe"]}')
    (ws / "tools" / "__init__.py").write_text("")
    (ws / "tools" / "probe.py").write_text(CTYPES_PLUGIN)
    subprocess.run(["git", "init", "-q"], cwd=ws, check=True)
    done = run([str(release / "standalone" / "vx" / "vx"), "probe"], ws, env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "imported at start: False; PyInstallerCDLL" in done.stdout, done.stdout
