"""The variables each package manager sets for a script, as a pure mapping (plan/lifecycle.py);
tests/scenarios/test_lifecycle_env.py holds it to the real tools."""

from __future__ import annotations

import pytest

from vx.plan import lifecycle
from vx.plan.lifecycle import Manager

MANIFEST = {
    "name": "@s/a",
    "version": "1.2.3",
    "description": "A",
    "readme": "# a",
    "_id": "@s/a@1.2.3",
    "author": "Ann <ann@example.com> (https://example.com)",
    "bin": "./cli.js",
    "config": {"port": 8080, "on": True, "off": False, "none": None, "list": ["x", 2]},
    "engines": {"node": ">=18"},
    "x-note": "one\ntwo",
    "scripts": {"build": "tsc"},
}


def _vars(name: str, version: str = "1.0.0", **over) -> dict[str, str]:
    args = {
        "manifest": MANIFEST,
        "event": "build",
        "script": "tsc",
        "args": (),
        "project_dir": "/w/packages/a",
        "root": "/w",
        "node_path": "/usr/bin/node",
        "agent": "ua",
        **over,
    }
    return lifecycle.variables(Manager(name, version, "v20.1.0"), **args)


@pytest.mark.parametrize(
    ("manager", "declared", "yarnrc", "expected"),
    [
        ("pnpm", "pnpm@9.15.9+sha512.abc", False, ("pnpm", "9.15.9")),
        ("npm", "pnpm@9.15.9", False, ("npm", "")),  # names another manager: no version
        ("yarn", "yarn@1.22.22", True, ("yarn", "1.22.22")),  # the major tells, not the file
        ("yarn", "yarn@4.5.3", False, ("berry", "4.5.3")),
        ("yarn", None, True, ("berry", "")),  # yarn 2+ writes .yarnrc.yml
        ("yarn", None, False, ("yarn", "")),
        ("bun", 7, False, ("bun", "")),
    ],
)
def test_the_manager_and_its_version(manager, declared, yarnrc, expected):
    assert lifecycle.flavour(manager, declared, yarnrc) == expected


def test_each_user_agent_is_spelled_as_its_manager_spells_it():
    ua = lifecycle.user_agent
    assert (
        ua(Manager("npm", "11.1.0", "v20.1.0"), "linux", "x64", True)
        == "npm/11.1.0 node/v20.1.0 linux x64 workspaces/true"
    )
    assert ua(Manager("npm", "11.1.0", "v20.1.0"), "linux", "x64", False).endswith(
        "workspaces/false"
    )
    assert ua(Manager("pnpm", "9.1.0", "v20.1.0"), "darwin", "arm64", True) == (
        "pnpm/9.1.0 npm/? node/v20.1.0 darwin arm64"
    )
    assert ua(Manager("pnpm", "12.0.0", "v20.1.0"), "linux", "x64", True) == (
        "pnpm/12.0.0 npm/? node/? linux x64"  # a native binary
    )
    assert ua(Manager("berry", "4.5.3", "v20.1.0"), "linux", "x64", True).startswith("yarn/4.5.3 ")
    assert ua(Manager("bun", "1.2.5", "v22.6.0"), "linux", "x64", True) == (
        "bun/1.2.5 npm/? node/v22.6.0 linux x64"
    )


def test_node_names_for_the_platform():
    assert lifecycle.platform_name("linux") == "linux"
    assert lifecycle.platform_name("freebsd14") == "freebsd"
    assert lifecycle.arch_name("x86_64") == "x64"
    assert lifecycle.arch_name("aarch64") == "arm64"
    assert lifecycle.arch_name("riscv64") == "riscv64"


def test_npm_sets_its_few_fields_as_written():
    env = lifecycle.npm_package_vars(MANIFEST)
    assert env == {
        "npm_package_name": "@s/a",
        "npm_package_version": "1.2.3",
        "npm_package_config_port": "8080",
        "npm_package_config_on": "true",
        "npm_package_config_off": "",
        "npm_package_config_none": "",
        "npm_package_config_list_0": "x",
        "npm_package_config_list_1": "2",
        "npm_package_engines_node": ">=18",
        "npm_package_bin_a": "cli.js",  # a string bin is named after the package, less its scope
    }
    assert "npm_package_name" not in lifecycle.npm_package_vars({"version": "1.0.0"})
    assert lifecycle.npm_package_vars({"bin": {"x-y": "../../z.js"}}) == {
        "npm_package_bin_x-y": "z.js"  # npm keeps the dash: `sh` drops such a name itself
    }


def test_pnpm_9_flattens_every_field_npm_6_s_way():
    env = lifecycle.flattened(MANIFEST)
    assert env["npm_package_description"] == "A"
    assert env["npm_package_author"] == MANIFEST["author"]  # as written
    assert env["npm_package_bin"] == "./cli.js"
    assert env["npm_package_config_off"] == "false"
    assert env["npm_package_config_none"] == "null"
    assert env["npm_package_x_note"] == '"one\\ntwo"'  # a name made a shell name; JSON-quoted
    assert env["npm_package_scripts_build"] == "tsc"
    assert not any(k.startswith(("npm_package_readme", "npm_package__id")) for k in env)


def test_pnpm_passes_the_forwarded_args_in_its_script_variables():
    env = _vars("pnpm", "9.15.9", args=("--watch", "a b"))
    assert env["npm_lifecycle_script"] == "tsc --watch 'a b'"
    assert env["npm_package_scripts_build"] == "tsc --watch 'a b'"
    assert "npm_package_json" not in env
    newer = _vars("pnpm", "10.1.0", args=("--watch",))
    assert newer["npm_lifecycle_script"] == "tsc --watch"
    assert newer["npm_package_json"] == "/w/packages/a/package.json"
    assert "npm_package_description" not in newer  # pnpm 10 keeps npm 7's fields only
    assert newer["npm_package_config_off"] == "false"
    assert _vars("npm", args=("--watch",))["npm_lifecycle_script"] == "tsc"


def test_yarn_1_flattens_its_normalised_manifest():
    env = lifecycle.yarn_package_vars(MANIFEST)
    assert env["npm_package_author_name"] == "Ann"
    assert env["npm_package_author_email"] == "ann@example.com"
    assert env["npm_package_author_url"] == "https://example.com"
    assert env["npm_package_bin_a"] == "cli.js"
    assert env["npm_package_x_note"] == '"one\\ntwo"'
    assert "npm_package_config_none" not in env  # null: an empty object to yarn
    assert lifecycle.yarn_package_vars({"keywords": "a b"}) == {
        "npm_package_name": "",
        "npm_package_version": "",
        "npm_package_keywords_0": "a",
        "npm_package_keywords_1": "b",
    }
    assert "npm_package_repository_url" not in lifecycle.yarn_package_vars(
        {"repository": "github:a/b"}  # rewritten by yarn's URL rules: left out
    )


def test_bun_sets_name_version_and_config_values():
    assert lifecycle.bun_package_vars(MANIFEST) == {
        "npm_package_name": "@s/a",
        "npm_package_version": "1.2.3",
        "npm_package_config_port": "8080",
    }


@pytest.mark.parametrize(
    ("name", "present", "absent"),
    [
        ("npm", {"NODE", "INIT_CWD", "npm_package_json", "npm_command"}, {"PROJECT_CWD"}),
        ("pnpm", {"NODE", "INIT_CWD", "PNPM_SCRIPT_SRC_DIR"}, {"PROJECT_CWD"}),
        ("yarn", {"NODE", "INIT_CWD", "npm_lifecycle_script"}, {"npm_command"}),
        ("berry", {"INIT_CWD", "PROJECT_CWD"}, {"NODE", "npm_lifecycle_script", "npm_command"}),
        ("bun", {"NODE", "npm_command", "npm_package_json"}, {"INIT_CWD"}),
    ],
)
def test_each_manager_sets_its_own_set(name, present, absent):
    env = _vars(name)
    assert present <= env.keys()
    assert not absent & env.keys()
    assert env["npm_lifecycle_event"] == "build"
    assert env["npm_config_user_agent"] == "ua"
    assert env["npm_node_execpath"] == "/usr/bin/node"
    assert all(lifecycle.is_script_variable(k) for k in env)
    if "INIT_CWD" in env:
        assert env["INIT_CWD"] == "/w/packages/a"  # where turbo starts the manager


def test_no_node_on_path_sets_no_node():
    env = _vars("npm", node_path=None)
    assert "NODE" not in env and "npm_node_execpath" not in env


def test_js_string():
    assert lifecycle.js_string(1.0) == "1"
    assert lifecycle.js_string(1.5) == "1.5"
    assert lifecycle.js_string(True) == "true"
    assert lifecycle.js_string(None) == "null"


def test_node_options_come_from_the_npmrc_for_npm_and_pnpm_only():
    text = "fund=false\nnode-options=--a # why\nnode-options = '--b --c' ; last wins\n"
    assert lifecycle.node_options("pnpm", text) == "--b --c"
    assert lifecycle.node_options("npm", "node-options=--no-warnings # punycode") == "--no-warnings"
    assert lifecycle.node_options("npm", "node-options=\n") is None
    assert lifecycle.node_options("yarn", text) is None
    assert lifecycle.node_options("bun", text) is None
    assert lifecycle.node_options("pnpm", None) is None
