"""exec.sandbox validation (SB-03, SB-04, SB-08, SB-09, SB-10; schema 2.5): every refusal names
the file, the field and a hint."""

from __future__ import annotations

import pytest

from vx.config.schema import validate_project
from vx.errors import ConfigError
from vx.model import SandboxConfig

FILE = "packages/app/vx.config.json"


def sandboxed(sandbox: object) -> dict:
    return {"tasks": {"build": {"exec": {"command": "tsc", "sandbox": sandbox}}}}


def load(sandbox: object) -> SandboxConfig:
    cfg = validate_project(sandboxed(sandbox), FILE).tasks["build"].exec
    assert cfg is not None and cfg.sandbox is not None
    return cfg.sandbox


def refusal(sandbox: object) -> ConfigError:
    with pytest.raises(ConfigError) as err:
        validate_project(sandboxed(sandbox), FILE)
    assert f"in: {FILE}" in err.value.render() and err.value.hint
    return err.value


@pytest.mark.feature("SB-02")
def test_empty_sandbox_is_the_baseline():
    assert load({}) == SandboxConfig()


def test_full_shape_is_read_into_the_model():
    cfg = load(
        {
            "allow": {
                "read": ["src/**", "../../tsconfig.base.json", "~/.cache/x/", "/opt/sdk/**"],
                "write": ["dist/", "*.tsbuildinfo"],
                "network": ["Registry.npmjs.org", "*.example.com:443"],
                "unixSockets": ["/var/run/docker.sock"],
                "localBinding": [3000],
                "pty": True,
                "gitConfig": True,
            },
            "deny": {"network": ["*"]},
            "ignore": {
                "read": ["node_modules/.cache/**"],
                "write": ["~/.npm/_logs/**"],
                "network": ["Example.com:443"],
            },
        }
    )
    assert cfg.read == ("src/**", "../../tsconfig.base.json", "~/.cache/x/", "/opt/sdk/**")
    assert cfg.write == ("dist/", "*.tsbuildinfo")
    assert cfg.network == ("registry.npmjs.org", "*.example.com:443")
    assert cfg.unix_sockets == ("/var/run/docker.sock",) and cfg.local_binding == (3000,)
    assert cfg.pty and cfg.git_config and cfg.deny_network == ("*",)
    assert cfg.ignore_network == ("example.com:443",)


@pytest.mark.feature("SB-08")
def test_network_true_and_false():
    assert load({"allow": {"network": True}}).network is True
    assert load({"allow": {"network": False}}).network == ()


@pytest.mark.feature("SB-08")
@pytest.mark.parametrize(
    "host, words",
    [
        ("https://example.com", "has a scheme"),
        ("example.com/path", "has a path"),
        ("*", "allows every host"),
        ("*.com", "too broad"),
        ("intranet", "has no dot"),
        ("exa mple.com", "not a host name"),
        ("example.com:99999", "a port is a number"),
    ],
)
def test_bad_host_patterns_are_refused(host, words):
    err = refusal({"allow": {"network": [host]}})
    assert err.field == "tasks.build.exec.sandbox.allow.network[0]"
    assert words in err.message + err.hint


def test_deny_network_accepts_star_and_localhost():
    assert load({"deny": {"network": ["*", "localhost:8080"]}}).deny_network == (
        "*",
        "localhost:8080",
    )


@pytest.mark.feature("SB-04")
@pytest.mark.parametrize(
    "grant, field, words",
    [
        ("../lib/dist/", "write[0]", "leaves the project"),
        ("../../.git/config", "write[0]", "leaves the project"),
        (".git/hooks/", "write[0]", "`.git` writable"),
        (".vx/cache/", "write[0]", "`.vx` writable"),
        ("src/../../x", "write[0]", "`..` after the start"),
    ],
)
def test_write_grants_stay_home_and_off_the_walls(grant, field, words):
    err = refusal({"allow": {"write": [grant]}})
    assert err.field == f"tasks.build.exec.sandbox.allow.{field}"
    assert words in err.message


@pytest.mark.feature("SB-03", "SB-18")
@pytest.mark.parametrize(
    "grant, words",
    [
        ("/opt/*/lib", "glob characters in a path outside the project"),
        ("~/.cache/{a,b}", "glob characters in a path outside the project"),
        ("~bob/x", "`~user`"),
        ("src\\a.js", "backslash"),
        ("src/{a", "unbalanced"),
        ("/opt/../etc", "`..` in an absolute path"),
    ],
)
def test_bad_grant_paths_are_refused(grant, words):
    err = refusal({"allow": {"read": [grant]}})
    assert err.field == "tasks.build.exec.sandbox.allow.read[0]"
    assert words in err.message


def test_glob_outside_the_project_hints_the_directory():
    err = refusal({"allow": {"read": ["/opt/sdk/*/lib"]}})
    assert "`/opt/sdk/`" in err.hint


@pytest.mark.feature("SB-03")
def test_read_grants_may_climb_to_workspace_files_and_end_in_globstar():
    assert (
        load({"allow": {"read": ["../../tsconfig.base.json", ".", "~/.cache/tool/**"]}}).read[1]
        == "."
    )


@pytest.mark.parametrize(
    "body, field, words",
    [
        ({"allow": {"reed": []}}, "allow.reed", "did you mean `read`?"),
        ({"allowRead": []}, "allowRead", "allow.read"),
        ({"allow": {"systemInfo": []}}, "allow.systemInfo", "macOS"),
        ({"weakerWhenNested": True}, "weakerWhenNested", "nested"),
        ({"allow": {"pty": "yes"}}, "allow.pty", "true or false"),
        ({"allow": {"localBinding": [0]}}, "allow.localBinding[0]", "ports are 1..65535"),
        ({"allow": {"unixSockets": ["docker.sock"]}}, "allow.unixSockets[0]", "absolute"),
        ({"ignore": {"network": ["example.com/x"]}}, "ignore.network[0]", "host:port"),
        ({"allow": {"read": "src/**"}}, "allow.read", "array"),
        ({"allow": []}, "allow", "an object"),
    ],
)
def test_shape_refusals_name_the_field(body, field, words):
    err = refusal(body)
    assert err.field == f"tasks.build.exec.sandbox.{field}"
    assert words in err.message + (err.hint or "")


def test_trace_is_a_boolean_or_left_to_the_workspace():  # issue 13, #3's decision
    assert load({}).trace is None
    assert load({"trace": False}).trace is False and load({"trace": True}).trace is True
    err = refusal({"trace": "no"})
    assert err.field == "tasks.build.exec.sandbox.trace" and "true or false" in err.message


def test_the_workspace_sandbox_trace():
    from vx.config.workspace_file import validate_workspace

    assert validate_workspace({}, "vx.workspace.json").sandbox_trace is True
    assert (
        validate_workspace({"sandbox": {"trace": False}}, "vx.workspace.json").sandbox_trace
        is False
    )
    for bad, words in (
        ({"sandbox": {"trace": 0}}, "true or false"),
        ({"sandbox": {"allow": {}}}, "per task"),
    ):
        with pytest.raises(ConfigError) as err:
            validate_workspace(bad, "vx.workspace.json")
        assert words in err.value.message + (err.value.hint or ""), err.value.render()
