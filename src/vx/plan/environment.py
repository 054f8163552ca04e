"""The world a task process sees: its environment variables and how many may run at once.

Both are read from the host once per run and then handed to the executor and scheduler as
plain values. Only the stdlib is imported here: this module is on every run's path.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Iterable, Iterator, Mapping

from vx.errors import UsageError

# what reaches every task from the host, whatever the config says. `CI` is not among
# them: a task that saw it could build differently in CI, and keying it would keep CI's cache
# entries from ever serving a laptop; a task that needs it declares it (then it is keyed).
ESSENTIAL_ENV = (
    "PATH", "HOME", "SHELL", "USER", "LOGNAME", "TMPDIR", "TEMP", "TMP",
    "LANG", "LC_ALL", "LC_CTYPE", "TERM", "COLORTERM", "FORCE_COLOR", "NO_COLOR",
    "NODE_OPTIONS", "COREPACK_HOME", "PNPM_HOME",
)  # fmt: skip
# Variables that change what a build produces, keyed whenever they reach a task — through the
# essential list or a `passThrough` — so a production build never replays a development one.
# The rest of the essential list (locations, terminal and colour) is passed and not keyed.
KEYED_ENV = ("NODE_ENV", "NODE_OPTIONS", "LANG", "LC_ALL", "LC_CTYPE", "CI", "BABEL_ENV", "TZ")
# NODE_OPTIONS flags that size the heap only: a build that runs out of memory fails, it never
# builds something else, so a CI's `--max-old-space-size` does not split the cache.
_HEAP_FLAGS = ("--max-old-space-size", "--max-semi-space-size")
COLOUR_ENV = ("FORCE_COLOR", "NO_COLOR")
CGROUP_ROOT = Path("/sys/fs/cgroup")
PROC_SELF_CGROUP = Path("/proc/self/cgroup")

_CONCURRENCY = re.compile(r"([0-9]+)(%?)")
_CONCURRENCY_HINT = "use a whole number of tasks such as 4, or a share of the CPUs such as 50%"


# ---------------------------------------------------------------- task environment


def task_env(
    *,
    host: Mapping[str, str],
    pass_through: Iterable[str],
    define: Mapping[str, str],
    project_dir_abs: Path | str,
    root: Path | str,
    workspace_id: str,
    task_id: str,
) -> dict[str, str]:
    """Build a task's environment from the allowlist, passThrough and define.

    Nothing else from the host leaks in: a task that reads an undeclared variable would
    otherwise hit the cache with a value the key never saw.
    """
    env = {name: host[name] for name in ESSENTIAL_ENV if name in host}
    env.update((name, host[name]) for name in matching(pass_through, host) if name in host)
    env.update(define)
    if not any(name in env for name in COLOUR_ENV):
        env["FORCE_COLOR"] = "1"  # output is piped, but the reporter shows it on a terminal
    env["PATH"] = _task_path(env.get("PATH"), project_dir_abs, root)
    env["VX_RUN_WORKSPACE"] = workspace_id
    env["VX_RUN_TASK"] = task_id
    return env


def keyed(
    declared: Iterable[str],
    inferred: Iterable[str],
    env: Mapping[str, str],
    host: Mapping[str, str],
) -> tuple[tuple[str, str | None], ...]:
    """What the key folds of the environment: `cache.inputs.env` by host value (unset
    folds as the bare name), the framework's inferred variables, then each of KEYED_ENV that
    reaches the task (`env`), unless already declared."""
    out = [(name, host.get(name)) for name in matching(declared, host)]
    seen = {name for name, _ in out}
    out += [(name, host[name]) for name in inferred if name not in seen and name in host]
    seen.update(inferred)
    for name in KEYED_ENV:
        if name in env and name not in seen:
            value = env[name]
            out.append((name, _heap_free(value) if name == "NODE_OPTIONS" else value))
    return tuple(out)


def _heap_free(options: str) -> str:
    return " ".join(w for w in options.split() if not w.startswith(_HEAP_FLAGS))


def inferred(framework: str, declared: Iterable[str], host: Mapping[str, str]) -> tuple[str, ...]:
    """The host variables `framework` reads at build time (turbo's framework inference), sorted,
    less those a `!` entry of the task's own env takes back."""
    from vx.workspace import frameworks

    patterns = frameworks.env_patterns(framework, host)
    found = [n for n in matching(patterns, host) if n in host]
    taken = [n for n in declared if n.startswith("!")]
    return tuple(sorted(matching([*found, *taken], host) if taken else found))


def matching(names: Iterable[str], host: Mapping[str, str]) -> tuple[str, ...]:
    """`names` as given, unless they hold turbo's patterns (a Turborepo repository's `env`):
    then the plain names, and the host's names each `*` pattern matches, sorted, less those a
    `!` entry takes back. vx's own configs hold plain names only."""
    names = tuple(names)
    if not any("*" in n or n.startswith("!") for n in names):
        return names

    def pattern(text: str) -> re.Pattern:
        return re.compile(".*".join(map(re.escape, text.split("*"))) + r"\Z")

    taken = [pattern(n[1:]) for n in names if n.startswith("!")]
    wanted = [pattern(n) for n in names if "*" in n and not n.startswith("!")]
    found = sorted(h for h in host if any(w.match(h) for w in wanted))  # reads the whole host env
    plain = [n for n in names if "*" not in n and not n.startswith("!")]
    return tuple(n for n in dict.fromkeys([*plain, *found]) if not any(t.match(n) for t in taken))


def _task_path(path: str | None, project_dir_abs: Path | str, root: Path | str) -> str:
    """Put the project's, then the root's, `node_modules/.bin` ahead of PATH.

    Why: package scripts call their devDependencies' binaries by bare name, as npm does.
    Plain string operations: this runs once per task while planning, pathlib costs 10× more.
    """
    project, top = os.path.normpath(os.fspath(project_dir_abs)), os.path.normpath(os.fspath(root))
    bins = [os.path.join(project, "node_modules", ".bin")]
    if project != top:
        bins.append(os.path.join(top, "node_modules", ".bin"))
    return os.pathsep.join([*bins, path if path else os.defpath])


task_path = _task_path  # the PATH a task (or a runtime probe) runs with


# ---------------------------------------------------------------- concurrency


def default_concurrency(
    *,
    cpus: int | None = None,
    cgroup_root: Path = CGROUP_ROOT,
    proc_cgroup: Path = PROC_SELF_CGROUP,
) -> int:
    """Return how many tasks run at once by default: the CPUs we may use, never below 1.

    The CPU count alone overcommits a container whose cgroup quota is smaller than the
    host, so the quota (v1 or v2, ancestors included) caps it.
    """
    count = available_cpus() if cpus is None else cpus
    quota = cgroup_cpu_limit(cgroup_root=cgroup_root, proc_cgroup=proc_cgroup)
    if quota is not None:
        count = min(count, int(quota))
    return max(1, count)


def available_cpus() -> int:
    """Count the CPUs this process may be scheduled on (its affinity mask, not the host)."""
    process_cpu_count = getattr(os, "process_cpu_count", None)  # Python 3.13+
    if process_cpu_count is not None:
        return process_cpu_count() or 1
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)) or 1
    return os.cpu_count() or 1


def parse_concurrency(text: str, cpus: int) -> int:
    """Read `--concurrency N` or `N%` (a share of `cpus`, at least 1) as plain decimal only.

    Why so strict: `int()` would take `+4`, ` 4`, `1_0` and non-ASCII digits; a typo
    should be refused, not silently turned into some other width.
    """
    match = _CONCURRENCY.fullmatch(text)
    if match is None:
        raise UsageError(f"invalid concurrency `{text}`", hint=_CONCURRENCY_HINT)
    number, percent = int(match.group(1)), bool(match.group(2))
    if number == 0:
        raise UsageError(f"concurrency `{text}` would run nothing", hint=_CONCURRENCY_HINT)
    return max(1, cpus * number // 100) if percent else number


def cgroup_cpu_limit(
    *, cgroup_root: Path = CGROUP_ROOT, proc_cgroup: Path = PROC_SELF_CGROUP
) -> float | None:
    """Return the tightest CPU quota over this process's cgroups and their ancestors, in CPUs.

    None means unlimited or unknown (no cgroup file system, as on macOS).
    """
    try:
        text = proc_cgroup.read_text()
    except OSError:
        return None
    limits: list[float] = []
    for hierarchy, controllers, path in _cgroup_entries(text):
        if hierarchy == "0" and controllers == "":
            limits += _v2_limits(cgroup_root, path)
        elif "cpu" in controllers.split(","):
            limits += _v1_limits(cgroup_root, controllers, path)
    return min(limits, default=None)


def memory_budget(*, cgroup_root: Path = CGROUP_ROOT, proc_cgroup: Path = PROC_SELF_CGROUP) -> int:
    """The machine's memory in bytes, capped by the tightest memory limit over this process's
    cgroups and their ancestors (v2 `memory.max`, v1 `memory.limit_in_bytes`)."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    try:
        text = proc_cgroup.read_text()
    except OSError:
        return total
    limits: list[int] = []
    for hierarchy, controllers, path in _cgroup_entries(text):
        if hierarchy == "0" and controllers == "":
            mount = (
                cgroup_root
                if (cgroup_root / "cgroup.controllers").exists()
                else cgroup_root / "unified"
            )
            files = [d / "memory.max" for d in _lineage(mount, path)]
        elif "memory" in controllers.split(","):
            mount = cgroup_root / controllers
            if not mount.is_dir():
                continue
            files = [d / "memory.limit_in_bytes" for d in _lineage(mount, path)]
        else:
            continue
        limits += [int(t) for t in map(_read_text, files) if t.isdigit()]
    return min([total, *limits])


def _cgroup_entries(text: str) -> Iterator[tuple[str, str, str]]:
    """Split /proc/self/cgroup lines `id:controllers:path`."""
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            yield parts[0], parts[1], parts[2]


def _v2_limits(cgroup_root: Path, path: str) -> list[float]:
    """Read `cpu.max` from the cgroup and every ancestor up to the v2 mount."""
    mount = (
        cgroup_root if (cgroup_root / "cgroup.controllers").exists() else cgroup_root / "unified"
    )
    limits = (_read_cpu_max(d / "cpu.max") for d in _lineage(mount, path))
    return [limit for limit in limits if limit is not None]


def _v1_limits(cgroup_root: Path, controllers: str, path: str) -> list[float]:
    """Read `cpu.cfs_quota_us / cpu.cfs_period_us` from the cgroup and its ancestors."""
    mounts = (cgroup_root / controllers, cgroup_root / "cpu", cgroup_root / "cpu,cpuacct")
    mount = next((m for m in mounts if m.is_dir()), None)
    if mount is None:
        return []
    limits = (_read_cfs(d) for d in _lineage(mount, path))
    return [limit for limit in limits if limit is not None]


def _lineage(mount: Path, path: str) -> list[Path]:
    """List the cgroup's directory and its ancestors up to and including the mount.

    In a container the path names the host's hierarchy while the mount shows only the
    container's subtree, so leading components are dropped until the directory exists.
    """
    parts = [p for p in path.split("/") if p]
    while parts and not mount.joinpath(*parts).is_dir():
        parts = parts[1:]
    dirs = [mount.joinpath(*parts[:depth]) for depth in range(len(parts), -1, -1)]
    return dirs


def _read_cpu_max(file: Path) -> float | None:
    """Parse v2 `cpu.max`: `max 100000` is unlimited, `50000 100000` is half a CPU."""
    fields = _read_text(file).split()
    if len(fields) != 2 or fields[0] == "max":
        return None
    return _ratio(fields[0], fields[1])


def _read_cfs(directory: Path) -> float | None:
    """Parse v1 CFS quota and period; a quota of -1 is unlimited."""
    return _ratio(
        _read_text(directory / "cpu.cfs_quota_us"), _read_text(directory / "cpu.cfs_period_us")
    )


def _ratio(quota: str, period: str) -> float | None:
    try:
        q, p = int(quota), int(period)
    except ValueError:
        return None
    return q / p if q > 0 and p > 0 else None


def _read_text(file: Path) -> str:
    try:
        return file.read_text().strip()
    except OSError:
        return ""
