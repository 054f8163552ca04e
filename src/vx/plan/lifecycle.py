"""The variables a package manager sets for a package.json script it runs: `npm_package_*`,
`npm_lifecycle_event`, `npm_lifecycle_script`, `npm_config_user_agent`, `npm_node_execpath`,
`INIT_CWD` and the rest, as npm, pnpm, yarn 1, yarn 2+ (berry) and bun each set them when turbo
(or Nx) has them run a package's script in its directory. vx runs the script itself (`sh -c`), so
it sets them: tools read them to learn their package, their script, or which manager runs them.

What each manager sets was read off the real tools (tests/scenarios/test_lifecycle_env.py holds
vx to them); docs/config.md has the table. Left out on purpose: what a manager sets from its own
settings and install (`npm_config_*` but the user agent, `npm_execpath`, berry's shim folder),
which names the manager's files on this machine rather than the script's package.

A pure mapping: where Node and the manager are on this machine is found by plan/toolchain.py.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import shlex
import sys
from typing import Any, Mapping

from msgspec import Struct

MANAGERS = ("npm", "pnpm", "yarn", "berry", "bun")  # berry: yarn 2 and later


class Manager(Struct, frozen=True):
    """The workspace's package manager as its scripts see it."""

    name: str  # one of MANAGERS
    version: str = "?"  # as its user agent spells it; "?" when not known
    node: str = "?"  # the Node version its user agent names ("v20.20.2")

    @property
    def major(self) -> int | None:
        found = re.match(r"(\d+)\.", self.version)
        return int(found.group(1)) if found else None


def flavour(manager: str, package_manager: Any, yarnrc: bool) -> tuple[str, str]:
    """(name, version) of the manager that runs the workspace's scripts: `manager` (what discovery
    found: `packageManager`, else the lockfile), yarn 2+ told apart by `packageManager`'s major
    or else a root `.yarnrc.yml` (yarn 2+ writes one); the version is `packageManager`'s when it
    names that manager, else "" (unknown)."""
    declared = package_manager if isinstance(package_manager, str) else ""
    spec_name, _, spec_version = declared.partition("@")
    version = spec_version.split("+")[0].strip() if spec_name == manager else ""
    if manager == "yarn":
        major = re.match(r"(\d+)\.", version)
        berry = int(major.group(1)) >= 2 if major else yarnrc
        return ("berry" if berry else "yarn"), version
    return manager, version


def platform_name(platform: str = sys.platform) -> str:
    """Node's `process.platform` for Python's `sys.platform`."""
    for prefix in ("linux", "darwin", "win32", "freebsd", "openbsd", "sunos", "aix"):
        if platform.startswith(prefix):
            return prefix
    return platform


_ARCHES = {
    "x86_64": "x64",
    "amd64": "x64",
    "aarch64": "arm64",
    "arm64": "arm64",
    "i386": "ia32",
    "i686": "ia32",
    "x86": "ia32",
    "ppc64le": "ppc64",
    "armv7l": "arm",
    "armv6l": "arm",
}


def arch_name(machine: str) -> str:
    """Node's `process.arch` for Python's `platform.machine()`."""
    return _ARCHES.get(machine.lower(), machine.lower())


def user_agent(manager: Manager, platform: str, arch: str, in_workspace: bool) -> str:
    """`npm_config_user_agent` as the manager spells it. npm names whether it runs in a workspace
    member (and, on a CI machine, the CI: left out, as the task sees no CI variable); the others
    name themselves, then `npm/?`. pnpm 12 and later are a native binary and name no Node."""
    if manager.name == "npm":
        member = "true" if in_workspace else "false"
        return f"npm/{manager.version} node/{manager.node} {platform} {arch} workspaces/{member}"
    name = "yarn" if manager.name == "berry" else manager.name
    node = "?" if manager.name == "pnpm" and (manager.major or 0) >= 12 else manager.node
    return f"{name}/{manager.version} npm/? node/{node} {platform} {arch}"


def variables(
    manager: Manager,
    *,
    manifest: Mapping[str, Any],
    event: str,
    script: str,
    args: tuple[str, ...],
    project_dir: str,
    root: str,
    node_path: str | None,
    agent: str,
) -> dict[str, str]:
    """What `manager` sets for the script `event` (text `script`, run with the forwarded `args`)
    of the package in `project_dir` (absolute) whose package.json is `manifest`, in a workspace at
    `root`, with Node at `node_path` (None: no Node on the task's PATH)."""
    name = manager.name
    json_path = os.path.join(project_dir, "package.json")
    env: dict[str, str] = {}
    if name == "npm":
        env.update(npm_package_vars(manifest))
        env["npm_package_json"] = json_path
    elif name == "pnpm" and (manager.major or 99) <= 9:
        with_args = f"{script} {_quoted(args)}" if args else script
        scripts = manifest.get("scripts")
        scripts = {**scripts, event: with_args} if isinstance(scripts, dict) else scripts
        env.update(flattened({**manifest, "scripts": scripts} if scripts else manifest))
    elif name == "pnpm":
        env.update(flattened({k: v for k, v in manifest.items() if k in _NPM7_FIELDS}))
        env["npm_package_json"] = json_path
    elif name == "yarn":
        env.update(yarn_package_vars(manifest))
    elif name == "berry":
        if isinstance(manifest.get("name"), str):
            env["npm_package_name"] = manifest["name"]
        version = manifest.get("version")
        env["npm_package_version"] = version if isinstance(version, str) else ""
        env["npm_package_json"] = json_path
    else:  # bun
        env.update(bun_package_vars(manifest))
        env["npm_package_json"] = json_path
    env["npm_lifecycle_event"] = event
    if name == "pnpm":
        env["npm_lifecycle_script"] = f"{script} {_quoted(args)}" if args else script
    elif name != "berry":
        env["npm_lifecycle_script"] = script
    if name in ("npm", "pnpm", "bun"):
        env["npm_command"] = "run" if name == "npm" else "run-script"
    env["npm_config_user_agent"] = agent
    if node_path is not None:
        env["npm_node_execpath"] = node_path
        if name != "berry":
            env["NODE"] = node_path
    if name != "bun":
        env["INIT_CWD"] = project_dir
    if name == "pnpm":
        env["PNPM_SCRIPT_SRC_DIR"] = project_dir
    if name == "berry":
        env["PROJECT_CWD"] = root
    return env


# what `variables` may set: derived from keyed inputs, or locations (docs/caching.md#environment)
_SCRIPT_NAMES = frozenset(
    ("npm_lifecycle_event", "npm_lifecycle_script", "npm_command", "npm_config_user_agent")
    + ("npm_node_execpath", "NODE", "INIT_CWD", "PNPM_SCRIPT_SRC_DIR", "PROJECT_CWD")
)


def node_options(manager: str, npmrc: str | None) -> str | None:
    """The NODE_OPTIONS npm and pnpm give a script in place of the caller's: the `node-options` of
    the workspace's `.npmrc` (text `npmrc`), the last one set; None when they pass the caller's
    (no such setting, or yarn or bun, which do not read it). Values read as both managers read
    `key=value`: up to a `#` or `;`, trimmed, and pnpm's surrounding quotes dropped."""
    if manager not in ("npm", "pnpm") or not npmrc:
        return None
    found = None
    for line in npmrc.splitlines():
        key, eq, value = line.partition("=")
        if eq and key.strip() == "node-options":
            value = re.split(r"[#;]", value, maxsplit=1)[0].strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
                value = value[1:-1]
            found = value or None
    return found


def is_script_variable(name: str) -> bool:
    """Whether `variables` may set `name` for a script."""
    return name in _SCRIPT_NAMES or name.startswith("npm_package_")


def _quoted(args: tuple[str, ...]) -> str:
    return " ".join(shlex.quote(a) for a in args)


# ---------------------------------------------------------------- npm_package_*


_NPM7_FIELDS = ("name", "version", "config", "engines", "bin")


def npm_package_vars(manifest: Mapping[str, Any]) -> dict[str, str]:
    """npm 7 and later: `name`, `version`, `config`, `engines` and `bin` (as npm normalises it),
    objects flattened with `_` and arrays by index, null and false as empty, names as they are
    (npm/rfcs#183). pnpm 10 and later keep the same fields but flatten them npm 6's way."""
    picked = {k: manifest[k] for k in _NPM7_FIELDS[:4] if k in manifest}
    if "bin" in manifest:
        picked["bin"] = _bin(manifest)
    env: dict[str, str] = {}
    _package_envs(picked, "npm_package_", env)
    return env


def _package_envs(values: Mapping[str, Any], prefix: str, env: dict[str, str]) -> None:
    for key, value in values.items():
        if value is None or value is False:
            env[f"{prefix}{key}"] = ""
        elif isinstance(value, list):
            for i, item in enumerate(value):
                _package_envs({f"{key}_{i}": item}, prefix, env)
        elif isinstance(value, dict):
            _package_envs(value, f"{prefix}{key}_", env)
        else:
            env[f"{prefix}{key}"] = js_string(value)


def _bin(manifest: Mapping[str, Any]) -> Any:
    """`bin` as npm normalises it: a string names one command after the package; each command
    is a base name and each path is made relative, `..` and `.` dropped."""
    value = manifest.get("bin")
    name = manifest.get("name")
    if isinstance(value, str) and isinstance(name, str):
        value = {name.split("/")[-1]: value}
    if not isinstance(value, dict):
        return value
    out = {}
    for command, path in value.items():
        base = posixpath.basename(re.sub(r"[\\:]", "/", command))
        if isinstance(path, str) and base:
            out[base] = posixpath.normpath("/" + path.replace("\\", "/"))[1:]
    return out


def flattened(manifest: Mapping[str, Any]) -> dict[str, str]:
    """npm 6's `npm_package_*`, which pnpm 9 and earlier keep: every field but `readme` and those
    starting with `_`, nested objects and arrays joined with `_`, each name made a shell name,
    a multi-line value JSON-quoted."""
    env: dict[str, str] = {}

    def walk(data: Mapping[str, Any], prefix: str) -> None:
        for key, value in data.items():
            if key.startswith("_") or key == "readme":
                continue
            name = re.sub(r"[^a-zA-Z0-9_]", "_", prefix + key)
            if isinstance(value, dict) and value:
                walk(value, name + "_")
            elif isinstance(value, list) and value:
                walk({str(i): v for i, v in enumerate(value)}, name + "_")
            elif not isinstance(value, (dict, list)):
                env[name] = _one_line(js_string(value))

    walk(manifest, "npm_package_")
    return env


# yarn 1 rewrites these from other files (README, LICENSE, AUTHORS, the bin and man folders) or
# by URL rules before it flattens them: vx leaves them out rather than set another value.
_YARN_REWRITTEN = frozenset(
    ("contributors", "maintainers", "repository", "bugs", "homepage", "licenses")
    + ("directories", "bundledDependencies", "bundleDependencies")
)
_YARN_BIN_NAME = re.compile(r"^(?!\.{0,2}$)[a-z0-9._-]+$", re.I)
_YARN_IGNORED = frozenset(("readme", "notice", "licenseText", "activationEvents", "contributes"))
_PERSON = re.compile(r"^([^(<]+)")
_EMAIL = re.compile(r"<([^>]+)>")
_URL = re.compile(r"\(([^)]+)\)")


def yarn_package_vars(manifest: Mapping[str, Any]) -> dict[str, str]:
    """yarn 1's `npm_package_*`: every field flattened with `_` (non-word characters as `_`),
    less `readme` and the like, `name` and `version` empty when absent, a string `author` split
    into name, email and url."""
    data: dict[str, Any] = {
        k: v for k, v in manifest.items() if k not in _YARN_REWRITTEN and k not in _YARN_IGNORED
    }
    data["name"] = manifest.get("name") or ""
    data["version"] = manifest.get("version") or ""
    if isinstance(data.get("author"), str):
        data["author"] = _person(data["author"])
    for key in ("keywords", "man"):  # a string is split into a list (a list stays)
        if isinstance(data.get(key), str):
            words = data[key].split() if key == "keywords" else [data[key]]
            data[key] = words
    if "bin" in data:
        data["bin"] = _yarn_bin(data["bin"], data["name"])
        if data["bin"] is None:
            del data["bin"]
    if data.get("license") in ("MIT/X11", "X11"):
        data["license"] = "MIT"
    env: dict[str, str] = {}
    queue: list[tuple[str, Any]] = [("", data)]
    while queue:  # yarn's own order: a later duplicate name wins as it does there
        key, value = queue.pop()
        if isinstance(value, (dict, list)):
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for sub, item in items:
                full = f"{key}_{sub}" if key else str(sub)
                if full and not full.startswith("_") and full not in _YARN_IGNORED:
                    queue.append((full, item))
        elif value is not None:  # null is an object to yarn, with nothing in it
            env[f"npm_package_{re.sub(r'[^a-zA-Z0-9_]', '_', key)}"] = _one_line(js_string(value))
    return env


def _yarn_bin(value: Any, name: str) -> dict[str, str] | None:
    """`bin` as yarn 1 keeps it: a string named after the package (less its scope), each entry
    a valid command name and a relative path, normalised."""
    if isinstance(value, str) and value:
        value = {re.sub(r"^@[^/]+/", "", name): value}
    if not isinstance(value, dict):
        return None
    out = {}
    for command, path in value.items():
        if not _YARN_BIN_NAME.match(command) or not isinstance(path, str) or not path:
            continue
        clean = posixpath.normpath(path)
        if not clean.startswith(("/", "../")) and clean != "..":
            out[command] = clean
    return out


def _person(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    name = _PERSON.match(text)
    if name and name.group(1).strip():
        out["name"] = name.group(1).strip()
    email = _EMAIL.search(text)
    if email:
        out["email"] = email.group(1)
    url = _URL.search(text)
    if url:
        out["url"] = url.group(1)
    return out


def bun_package_vars(manifest: Mapping[str, Any]) -> dict[str, str]:
    """bun's `npm_package_*`: `name`, `version` and `config`'s top-level values."""
    env: dict[str, str] = {}
    for key in ("name", "version"):
        value = manifest.get(key)
        if isinstance(value, str):
            env[f"npm_package_{key}"] = value
    config = manifest.get("config")
    if isinstance(config, dict):
        for key, value in config.items():
            if isinstance(value, (str, int, float)) and not isinstance(value, bool):
                env[f"npm_package_config_{key}"] = js_string(value)
    return env


def js_string(value: Any) -> str:
    """JavaScript's `String(value)` for a JSON scalar."""
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "null"
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e21:
            return str(int(value))
        return repr(value)
    return str(value)


def _one_line(text: str) -> str:
    return json.dumps(text, ensure_ascii=False) if "\n" in text else text
