"""A task that runs a package.json script sees the variables the workspace's package manager sets
when it runs that script (`npm_package_*`, `npm_lifecycle_*`, the user agent, `INIT_CWD`, …):
the real npm, pnpm 9, 10 and 12, yarn 1, yarn 4 and bun are the oracle, each running the same
script in the member's directory as turbo has it do."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from support.npm_packages import installed

# Writes the variables a package manager sets (and nothing of the host's) to out/<who>.json.
DUMP = """
const fs = require('fs'), path = require('path');
const who = process.env.VX_RUN_TASK ? 'vx' : 'pm';
const wanted = (k) => /^(npm_|INIT_CWD$|NODE$|PROJECT_CWD$|PNPM_SCRIPT_SRC_DIR$)/.test(k);
const seen = Object.fromEntries(Object.keys(process.env).filter(wanted).sort()
  .map((k) => [k, process.env[k]]));
fs.mkdirSync('out', {recursive: true});
fs.writeFileSync(path.join('out', who + '.json'), JSON.stringify(seen, null, 1));
"""

MEMBER = {
    "name": "@scope/a",
    "version": "1.2.3",
    "description": "A package",
    "main": "index.js",
    "license": "MIT",
    "private": True,
    "author": "Ann Example <ann@example.com> (https://example.com)",
    "keywords": ["one", "two"],
    "files": ["dist", "bin"],
    "bin": {"a-cli": "./bin/a.js", "a_tool": "bin/tool.js"},
    "config": {"port": "8080", "nested": {"deep": True}, "list": [1, "two"], "off": False},
    "engines": {"node": ">=18"},
    "publishConfig": {"access": "public"},
    "x-note": "line one\nline two",
    "scripts": {"show": "node ../../dump.js", "other": "echo other"},
}

# Where a manager's variable names its own files on this machine rather than the script's
# package: vx leaves these out (docs/config.md#package-manager-variables).
NOT_SET = ("npm_execpath", "npm_config_")


def _manager_argv(pm: str) -> list[str]:
    if pm == "npm":
        return ["npm"]
    if pm.startswith("pnpm"):
        return [str(installed(pm) / "pnpm" if pm == "pnpm@12" else installed(pm) / "bin/pnpm.cjs")]
    if pm == "yarn":
        return ["node", str(installed("yarn") / "bin" / "yarn.js")]
    if pm == "berry":
        return ["node", str(installed("@yarnpkg/cli-dist") / "bin" / "yarn.js")]
    return [str(installed("bun") / "bin" / "bun.exe")]


PACKAGE_MANAGER = {
    "pnpm": "pnpm@9.15.9",
    "pnpm@10": "pnpm@10.34.9",
    "yarn": "yarn@1.22.22",
    "berry": "yarn@4.5.3",
    "bun": "bun@1.2.5",
}  # npm's and pnpm 12's workspaces name none: vx reads the version of the one on PATH (pnpm 12
# would otherwise fetch its own binaries for every platform first)


def _workspace(repo, pm: str, tmp: Path):
    root: dict = {"name": "root", "version": "0.0.0", "private": True}
    if pm in PACKAGE_MANAGER:
        root["packageManager"] = PACKAGE_MANAGER[pm]
    root["workspaces"] = ["packages/*"]
    files: dict[str, object] = {
        "package.json": root,
        "turbo.json": {"tasks": {"show": {"cache": False}}},
        "dump.js": DUMP,
        "packages/a/package.json": MEMBER,
        ".gitignore": "node_modules/\nout/\n.vx/\n.yarn/\n.pnp.*\n",
    }
    if pm.startswith("pnpm"):
        files["pnpm-workspace.yaml"] = "packages:\n  - packages/*\n"
    if pm == "berry":
        files[".yarnrc.yml"] = "nodeLinker: node-modules\nenableTelemetry: false\n"
        files["yarn.lock"] = ""
    ws = repo.write(files)
    if pm == "berry":  # yarn 2+ runs a script only in an installed project
        _run([*_manager_argv(pm), "install"], ws.root, tmp, pm)
    return ws.commit()


def _env(tmp: Path, pm: str) -> dict[str, str]:
    """A clean environment, as turbo gives the package manager it starts; bun (vx asks it the
    Node version it names) and pnpm 12 on PATH."""
    shims = tmp / "shims"
    if not shims.exists():
        shims.mkdir()
        (shims / "bun").symlink_to(installed("bun") / "bin" / "bun.exe")
        if pm == "pnpm@12":
            (shims / "pnpm").symlink_to(installed(pm) / "pnpm")
    return {
        "PATH": f"{shims}{os.pathsep}{os.environ['PATH']}",
        "HOME": os.environ.get("HOME", str(tmp)),
        "COREPACK_ENABLE_STRICT": "0",
        "YARN_ENABLE_TELEMETRY": "0",
        "YARN_GLOBAL_FOLDER": str(tmp / "berry"),
        "npm_config_manage_package_manager_versions": "false",
        "npm_config_update_notifier": "false",
    }


def _run(argv: list[str], cwd: Path, tmp: Path, pm: str) -> None:
    proc = subprocess.run(
        argv, cwd=cwd, env=_env(tmp, pm), capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, f"{argv}: {proc.stdout}\n{proc.stderr}"


def _comparable(seen: dict[str, str]) -> dict[str, str]:
    return {
        k: v for k, v in seen.items() if not k.startswith(NOT_SET) or k == "npm_config_user_agent"
    }


@pytest.mark.feature("EX-23")
@pytest.mark.parametrize("pm", ["npm", "pnpm", "pnpm@10", "pnpm@12", "yarn", "berry", "bun"])
def test_a_script_sees_what_its_package_manager_sets(repo, tmp_path, pm):
    ws = _workspace(repo, pm, tmp_path)
    member = ws.root / "packages" / "a"
    _run([*_manager_argv(pm), "run", "show"], member, tmp_path, pm)
    oracle = json.loads((member / "out" / "pm.json").read_text())

    result = ws.vx("run", "show", env=_env(tmp_path, pm))
    assert result.code == 0, result.err
    seen = json.loads((member / "out" / "vx.json").read_text())

    expected = _comparable(oracle)
    if pm == "berry":  # a shim of yarn's own, in a folder made for one run: vx names node itself
        assert Path(oracle["npm_node_execpath"]).name == "node"
        expected["npm_node_execpath"] = seen.get("npm_node_execpath", "")
        assert os.path.realpath(expected["npm_node_execpath"]) == expected["npm_node_execpath"]
    assert seen == expected
    assert seen["npm_package_name"] == "@scope/a"  # the oracle ran, with something to compare
    assert seen["npm_lifecycle_event"] == "show"


@pytest.mark.feature("EX-23")
def test_an_nx_script_target_gets_them_and_a_vx_task_does_not(repo, tmp_path):
    """Nx runs an `nx:run-script` target through the package manager: the same variables (npm
    here). A vx.config.json task runs its own command, not a script: none of them."""
    ws = repo.write(
        {
            "package.json": {"name": "root", "private": True, "workspaces": ["packages/*"]},
            "nx.json": {"targetDefaults": {}},
            "dump.js": DUMP,
            "packages/a/package.json": MEMBER,
            "packages/b/package.json": {"name": "b", "version": "1.0.0"},
            "packages/b/vx.config.json": {
                "tasks": {"show": {"exec": {"command": "node ../../dump.js"}}}
            },
            ".gitignore": "node_modules/\nout/\n.vx/\n",
        }
    ).commit()
    member = ws.root / "packages" / "a"
    _run(["npm", "run", "show"], member, tmp_path, "npm")
    result = ws.vx("run", "show", env=_env(tmp_path, "npm"))
    assert result.code == 0, result.err
    seen = json.loads((member / "out" / "vx.json").read_text())
    assert seen == _comparable(json.loads((member / "out" / "pm.json").read_text()))
    assert json.loads((ws.root / "packages" / "b" / "out" / "vx.json").read_text()) == {}


# Writes NODE_OPTIONS as the script sees it to out/<who>.options.
DUMP_OPTIONS = """
const fs = require('fs'), path = require('path');
const who = process.env.VX_RUN_TASK ? 'vx' : 'pm';
fs.mkdirSync('out', {recursive: true});
fs.writeFileSync(path.join('out', who + '.options'), JSON.stringify(process.env.NODE_OPTIONS ?? null));
"""


@pytest.mark.feature("EX-23")
@pytest.mark.parametrize("pm", ["npm", "pnpm@10", "yarn", "bun"])
def test_the_workspace_npmrc_node_options_reach_a_script_as_its_manager_passes_them(
    repo, tmp_path, pm
):
    """npm and pnpm run a script with NODE_OPTIONS set to the `node-options` of the workspace's
    `.npmrc` (trpc/trpc's, `--no-warnings`, is one), in place of the caller's; vx does as the
    workspace's manager does, whatever NODE_OPTIONS the host has."""
    _workspace(repo, pm, tmp_path)
    ws = repo.write(
        {
            ".npmrc": "fund=false\nnode-options=--no-warnings --max-old-space-size=3000 # why\n",
            "dump.js": DUMP_OPTIONS,
        }
    ).commit()
    member = ws.root / "packages" / "a"
    env = {**_env(tmp_path, pm), "NODE_OPTIONS": "--trace-warnings"}
    proc = subprocess.run(
        [*_manager_argv(pm), "run", "show"], cwd=member, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    oracle = json.loads((member / "out" / "pm.options").read_text())

    result = ws.vx("run", "show", env=env)
    assert result.code == 0, result.err
    assert json.loads((member / "out" / "vx.options").read_text()) == oracle
    if pm in ("npm", "pnpm@10"):
        assert oracle == "--no-warnings --max-old-space-size=3000"
