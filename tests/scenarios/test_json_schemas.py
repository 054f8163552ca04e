"""The JSON Schemas vx ships (src/vx/schemas) against vx itself, without running a workspace:
the config schemas accept what vx's validators accept and refuse what they refuse, each output
schema accepts the rare shapes its producer can print (every optional field at once) and
refuses a wrong one, and every schema is in the package data and documented.

The outputs the scenarios produce are validated as they are produced (support/workspace.py);
this module covers the branches a scenario seldom reaches."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
from support.schemas import SCHEMAS, problems, validate

from vx.config.jsonc import loads
from vx.config.project import validate_project
from vx.config.workspace_file import validate_workspace
from vx.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]

# ---------------------------------------------------------------- the config schemas

SANDBOX = {
    "allow": {
        "read": ["/etc/ssl/**"],
        "write": ["dist/**", "~/.cache/x"],
        "network": ["registry.npmjs.org", "*.example.com"],
        "unixSockets": ["/var/run/docker.sock"],
        "localBinding": [3000, 5173],
        "pty": True,
        "gitConfig": False,
    },
    "deny": {"network": ["evil.example.com"]},
    "ignore": {"read": ["/proc/**"], "write": ["/tmp/**"], "network": ["example.com:443"]},
    "trace": False,
}

PROJECTS = {
    "every key": {
        "$schema": "./node_modules/whatever/config.json",
        "tags": ["frontend", "web-app"],
        "tasks": {
            "$schema": 1,
            "build": {
                "$schema": "x",
                "description": "bundle",
                "dependsOn": ["^build", "codegen", "shared#build", "//#setup", "gen.*", "^gen.*"],
                "exec": {
                    "command": "tsc -b",
                    "env": {
                        "passThrough": ["HOME"],
                        "define": {"NODE_ENV": "production", "$schema": 2},
                        "secret": ["NPM_TOKEN"],
                    },
                    "timeout": 60000,
                    "retries": 2,
                    "sandbox": SANDBOX,
                },
                "cache": {
                    "inputs": {
                        "files": ["src/**", "!src/**/*.test.ts"],
                        "workspaceFiles": ["tsconfig.base.json"],
                        "env": ["API_URL"],
                        "tasks": ["^build", "codegen", "shared#build", "!^lint*", "*"],
                        "runtime": ["node -v"],
                        "workspaceRuntime": ["git --version"],
                    },
                    "outputs": {"files": ["dist/**"], "workspaceFiles": ["out/app/**"]},
                },
            },
            "codegen": {
                "exec": {"command": "gen", "remote": True, "platform": {"OSFamily": "linux"}},
                "cache": {"inputs": {"files": []}, "outputs": {"files": ["gen/**"]}},
            },
            "setup": {"exec": {"command": "true", "remote": False, "interactive": False}},
            "gen.a": {"exec": {"command": "true"}},
            "dev": {"exec": {"command": "vite", "persistent": {"readyWhen": "ready in"}}},
            "serve": {"exec": {"command": "serve", "persistent": {}, "interactive": True}},
            "check": {"dependsOn": ["build", "dev"]},
        },
    },
    "empty": {},
    "tags only": {"tags": []},
    "a group": {"tasks": {"all": {"dependsOn": []}}},
}

PROJECT_REFUSALS = {
    "an unknown top-level key": {"pipeline": {}},
    "an unknown task key": {"tasks": {"b": {"exec": {"command": "x"}, "outputs": []}}},
    "an unknown exec key": {"tasks": {"b": {"exec": {"command": "x", "cwd": "a"}}}},
    "an unknown cache key": {
        "tasks": {
            "b": {
                "exec": {"command": "x"},
                "cache": {"inputs": {"files": []}, "outputs": {"files": []}, "x": 1},
            }
        }
    },
    "an unknown sandbox key": {
        "tasks": {"b": {"exec": {"command": "x", "sandbox": {"allow": {"exec": []}}}}}
    },
    "a wrong type": {"tasks": {"b": {"exec": {"command": ["x"]}}}},
    "a timeout as a string": {"tasks": {"b": {"exec": {"command": "x", "timeout": "5s"}}}},
    "retries out of range": {"tasks": {"b": {"exec": {"command": "x", "retries": 101}}}},
    "no command": {"tasks": {"b": {"exec": {}}}},
    "neither exec nor dependsOn": {"tasks": {"b": {"description": "d"}}},
    "cache on a group": {
        "tasks": {
            "b": {"dependsOn": [], "cache": {"inputs": {"files": []}, "outputs": {"files": []}}}
        }
    },
    "cache without outputs": {
        "tasks": {"b": {"exec": {"command": "x"}, "cache": {"inputs": {"files": []}}}}
    },
    "cache: true": {"tasks": {"b": {"exec": {"command": "x"}, "cache": True}}},
    "persistent: true": {"tasks": {"b": {"exec": {"command": "x", "persistent": True}}}},
    "retries on a persistent task": {
        "tasks": {"b": {"exec": {"command": "x", "persistent": {}, "retries": 1}}}
    },
    "a bad task name": {"tasks": {"a#b": {"exec": {"command": "x"}}}},
    "a bad dependsOn entry": {"tasks": {"b": {"dependsOn": ["^a#b"]}}},
    "a bad env name": {"tasks": {"b": {"exec": {"command": "x", "env": {"passThrough": ["A-B"]}}}}},
    "a wildcard tag": {"tags": ["front*"]},
    "remote: maybe": {"tasks": {"b": {"exec": {"command": "x", "remote": "maybe"}}}},
    "a port out of range": {
        "tasks": {"b": {"exec": {"command": "x", "sandbox": {"allow": {"localBinding": [70000]}}}}}
    },
}

WORKSPACES = {
    "every key": {
        "$schema": "https://example.com/workspace.json",
        "concurrency": 4,
        "cacheDir": ".vx/cache",
        "timeout": 600000,
        "remoteCache": {
            "$schema": 1,
            "turbo": {
                "apiUrl": "https://cache.example.com",
                "team": "web",
                "teamId": "t",
                "signature": True,
            },
            "upload": "always",
            "timeout": 30000,
            "maxArtifactSize": 1000000,
        },
        "cacheRetention": {"olderThan": "30d", "maxSize": "10G"},
        "affectedBase": "origin/main",
        "rules": {"exclusiveOutputs": False},
        "sandbox": {"trace": False},
        "migrated": "turbo",
        "remoteExecution": {
            "capacity": 8,
            "default": True,
            "platform": {"OSFamily": "linux"},
            "updateTimeout": 1000,
            "queueTimeout": 2000,
        },
        "cacheScope": "pr-42",
        "schedule": {
            "history": False,
            "window": 50,
            "assume": {"build": 30000, "web#test": 0},
            "file": ".vx-timings.json",
        },
        "plugins": ["vx.plugins.otel", {"name": "my_plugin", "options": {"level": 2}}],
    },
    "an nx remote": {"remoteCache": {"nx": {"url": "https://nx.example.com"}}},
    "a reapi remote": {
        "remoteCache": {
            "reapi": {
                "endpoint": "grpcs://remote.example.com",
                "instance": "main",
                "caCert": "ca.pem",
                "clientCert": "c.pem",
                "clientKey": "k.pem",
                "maxConnections": 16,
            },
            "upload": "never",
        }
    },
    "a plain grpc remote": {"remoteCache": {"reapi": {"endpoint": "grpc://127.0.0.1:50051"}}},
    "a turbo remote without a signature": {"remoteCache": {"turbo": {"signature": None}}},
    "empty": {},
    "a size in MiB": {"cacheRetention": {"maxSize": "500MiB"}},
    "a padded duration, a size in capitals": {
        "cacheRetention": {"olderThan": " 12h ", "maxSize": "2KIB"}
    },
}

WORKSPACE_REFUSALS = {
    "an unknown key": {"pipeline": {}},
    "an unknown nested key": {"rules": {"upfrontKeys": True}},
    "a wrong type": {"concurrency": "4"},
    "concurrency 0": {"concurrency": 0},
    "a token": {"remoteCache": {"turbo": {"token": "s3cret"}}},
    "two remotes": {"remoteCache": {"turbo": {}, "nx": {}}},
    "no remote": {"remoteCache": {"upload": "ci"}},
    "a bad upload mode": {"remoteCache": {"turbo": {}, "upload": "sometimes"}},
    "an http reapi endpoint": {"remoteCache": {"reapi": {"endpoint": "http://h:1"}}},
    "a client cert without its key": {
        "remoteCache": {"reapi": {"endpoint": "grpcs://h", "clientCert": "c.pem"}}
    },
    "a retention bounding nothing": {"cacheRetention": {}},
    "a bad duration": {"cacheRetention": {"olderThan": "30 days"}},
    "migrated from make": {"migrated": "make"},
    "a bad plugin name": {"plugins": ["not a module"]},
    "a plugin entry without a name": {"plugins": [{"options": {}}]},
    "a bad scope": {"cacheScope": "pr 42"},
    "a window too wide": {"schedule": {"window": 1001}},
}


def _accepted(validator, data, file: str) -> bool:
    try:
        validator(copy.deepcopy(data), file)
    except ConfigError:
        return False
    return True


@pytest.mark.feature("WS-07")
@pytest.mark.parametrize("name", sorted(PROJECTS))
def test_a_project_config_vx_accepts_the_schema_accepts(name):
    assert _accepted(validate_project, PROJECTS[name], "vx.config.json")
    validate(PROJECTS[name], "config.json", name)


@pytest.mark.feature("WS-07")
@pytest.mark.parametrize("name", sorted(PROJECT_REFUSALS))
def test_a_project_config_vx_refuses_the_schema_refuses(name):
    assert not _accepted(validate_project, PROJECT_REFUSALS[name], "vx.config.json"), name
    assert problems(PROJECT_REFUSALS[name], "config.json"), name


@pytest.mark.feature("WS-07")
@pytest.mark.parametrize("name", sorted(WORKSPACES))
def test_a_workspace_config_vx_accepts_the_schema_accepts(name):
    assert _accepted(validate_workspace, WORKSPACES[name], "vx.workspace.json")
    validate(WORKSPACES[name], "workspace.json", name)


@pytest.mark.feature("WS-07")
@pytest.mark.parametrize("name", sorted(WORKSPACE_REFUSALS))
def test_a_workspace_config_vx_refuses_the_schema_refuses(name):
    assert not _accepted(validate_workspace, WORKSPACE_REFUSALS[name], "vx.workspace.json")
    assert problems(WORKSPACE_REFUSALS[name], "workspace.json"), name


@pytest.mark.feature("WS-07")
def test_every_config_in_the_examples_validates():
    """Each vx.config / vx.workspace file under examples/ is one vx accepts and the schema too."""
    found = sorted(ROOT.glob("examples/**/vx.config.json*")) + sorted(
        ROOT.glob("examples/**/vx.workspace.json*")
    )
    assert found
    for path in found:
        rel = str(path.relative_to(ROOT))
        data = loads(path.read_text(), rel)
        if path.name.startswith("vx.workspace"):
            assert _accepted(validate_workspace, data, rel), rel
            validate(data, "workspace.json", rel)
        else:
            assert _accepted(validate_project, data, rel), rel
            validate(data, "config.json", rel)


# ---------------------------------------------------------------- the rare output shapes

RUN_ID = "0190f5c2-7a2b-7c3d-8e4f-0123456789ab"


@pytest.mark.feature("CLI-60")
def test_a_summary_with_every_optional_field_validates_and_a_wrong_one_does_not():
    """`--summarize` from the code that writes it: measurements, a timeout, a blocked task, a
    persistent one, sandbox violations, an aborted task with no key."""
    from vx.model import CacheStatus, RunSummary, Status, TaskId, TaskResult, Violation
    from vx.report.summary import summary_dict

    key = "0123456789abcdef"
    results = (
        TaskResult(
            TaskId("a", "build"),
            Status.SUCCESS,
            CacheStatus.LOCAL,
            key=key,
            duration_ms=1.5,
            exit_code=0,
            cpu_ms=3.0,
            peak_rss_bytes=1 << 20,
            stored_ms=900.0,
            attempts=1,
        ),
        TaskResult(
            TaskId("a", "test"),
            Status.FAILED,
            CacheStatus.MISS,
            key=key,
            exit_code=None,
            timed_out=True,
            attempts=2,
            violations=(
                Violation("write", "../x", 'allow.write "../x"'),
                Violation("network", "example.com:443", "allow.network"),
            ),
        ),
        TaskResult(
            TaskId("a", "e2e"),
            Status.SKIPPED,
            CacheStatus.NO_CACHE,
            blocked_by=TaskId("a", "test"),
            reason="blocked",
        ),
        TaskResult(
            TaskId("a", "dev"),
            Status.SUCCESS,
            CacheStatus.NO_CACHE,
            key=key,
            persistent=True,
            reason="stopped",
        ),
        TaskResult(TaskId("//", "lint"), Status.ABORTED, CacheStatus.NO_CACHE),
    )
    doc = summary_dict(RunSummary(RUN_ID, results, 1.7e9, 1.7e9 + 2, 130), {"pr": "42"})
    validate(doc, "summary.json")
    assert doc["tasks"][4]["hash"] is None
    wrong = copy.deepcopy(doc)
    wrong["tasks"][0]["status"] = "cache-hit"
    assert problems(wrong, "summary.json")
    wrong = copy.deepcopy(doc)
    del wrong["tasks"][3]["reason"]  # a persistent task always says how it ended
    assert problems(wrong, "summary.json")


@pytest.mark.feature("CLI-60")
def test_a_plan_with_a_group_and_an_implicit_task_validates():
    from vx.events import PlannedTask
    from vx.model import TaskId
    from vx.report.dry import dry_json

    key = "fedcba9876543210"
    plan = [
        PlannedTask(
            TaskId("a", "build"), "tsc", key, "miss", (), "packages/a", (("src/a.ts", "x"),)
        ),
        PlannedTask(TaskId("a", "all"), None, key, "group", (TaskId("a", "build"),), "packages/a"),
        PlannedTask(TaskId("b", "build"), None, key, "not-started", (), "", (), implicit=True),
    ]
    doc = json.loads(dry_json(plan))
    validate(doc, "plan.json")
    doc["tasks"][0]["predicted"] = "hit"
    assert problems(doc, "plan.json")


@pytest.mark.feature("CLI-60")
def test_a_pruned_cache_validates():
    from vx.cli.cache import pruned_data
    from vx.store.pruning import Pruned, Row

    doc = pruned_data(Pruned(True, (Row("0123456789abcdef", "a#build", 10, 1.7e9, "c"),), 1, 2))
    validate(doc, "cache.json")
    doc["evicted"][0]["bytes"] = "10"
    assert problems(doc, "cache.json")


# ---------------------------------------------------------------- shipped and documented


@pytest.mark.feature("CLI-60")
def test_every_schema_ships_and_is_documented():
    """Each schema is draft 2020-12 with its file name as `$id`, in the wheel's package data
    (`schemas/*.json`), and named in docs/cli.md § Machine-readable output."""
    names = sorted(p.name for p in SCHEMAS.glob("*.json"))
    assert len(names) >= 14, names
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert '"schemas/*.json"' in pyproject
    cli = (ROOT / "docs" / "cli.md").read_text()
    section = cli[cli.index("## Machine-readable output") :]
    section = section[: section.find("\n## ", 1)]
    for name in names:
        schema = json.loads((SCHEMAS / name).read_text())
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema", name
        assert schema["$id"] == f"vx/schemas/{name}", name
        assert re.search(rf"`{re.escape(name)}`", section), f"{name} not in docs/cli.md"


@pytest.mark.feature("CLI-60")
def test_each_why_verdict_validates():
    """`vx why`'s verdicts from the code that makes them: a hit with what last moved its key
    (every kind of difference), a change, a first key, runs without a key, an uncached plan."""
    from vx.cli.why import _verdict

    def record(**moved):
        base = {
            "fingerprint": "f", "package": "p", "config": "c", "args": None,
            "env": {"A": None}, "upstream": {"lib#build": "0123456789abcdef"},
            "files": {"src/a.ts": "1"}, "lockfile": {"npm: x": "1"},
            "runtime": {"node": "v20", "runtime:tsc -v:stdout": "1", "ws-runtime:git:stdout": "1"},
            "plugin": {"p": "1"},
        }  # fmt: skip
        return {**base, **moved}

    new = record(
        fingerprint="g", lockfile={"npm: x": "2"}, package="q", config="d", args="a",
        env={"A": "x"}, upstream={"lib#build": "fedcba9876543210"}, files={"src/b.ts": "1"},
        runtime={"node": "v22", "runtime:tsc -v:stdout": "2", "ws-runtime:git:stdout": "2"},
        plugin={"p": "2"},
    )  # fmt: skip
    k1, k2 = "0123456789abcdef", "fedcba9876543210"
    rows = [(k2, 1.7e9 + 1, new), (k1, 1.7e9, record())]
    last = {"runId": RUN_ID, "at": 1.7e9, "key": k2, "status": "cache-hit", "cache": "local",
            "since": 1.7e9}  # fmt: skip
    hit = _verdict("app#build", rows, last)
    assert hit["verdict"] == "hit" and len(hit["lastChange"]["differences"]) >= 10
    kinds = {d["kind"] for d in hit["lastChange"]["differences"]}
    assert {"lockfile", "runtime", "ws-runtime", "plugin", "file", "upstream"} <= kinds
    validate(hit, "why.json")
    changed = _verdict("app#build", rows, {**last, "status": "success", "cache": "miss"})
    assert changed["verdict"] == "changed"
    validate(changed, "why.json")
    validate(_verdict("app#build", rows[:1], None), "why.json")
    validate(_verdict("app#build", [], {**last, "key": "", "cache": "no-cache"}), "why.json")
    validate({"task": "app#dev", "verdict": "planned", "differences": [], "cached": False},
             "why.json")  # fmt: skip
    same = {"task": "app#build", "run": {**last}, "lastRun": last, "verdict": "same", "key": k2,
            "differences": []}  # fmt: skip
    del same["run"]["since"]
    validate(same, "why.json")
    gone = {"task": "app#build", "run": same["run"], "lastRun": last, "verdict": "changed",
            "from": k1, "to": k2, "differences": [], "componentsKept": False}  # fmt: skip
    validate(gone, "why.json")
    assert problems({**gone, "verdict": "same"}, "why.json")
    assert problems({**hit, "differences": [{"kind": "moon", "what": "x"}]}, "why.json")
