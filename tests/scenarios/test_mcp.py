"""`vx mcp`: the MCP server an agent talks to, driven by the official `mcp` SDK's client over
stdio against the real `vx mcp` process in a real git workspace, and by raw JSON-RPC lines for
what the SDK never sends (batches, malformed messages, old revisions)."""

import json
import os
import subprocess
import sys

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from support.workspace import SRC, npm_workspace

SECRET = "s3cr3t-deploy-value"
OK = (
    "node -e \"require('fs').mkdirSync('dist',{recursive:true});"
    "require('fs').writeFileSync('dist/o','x');console.log('built')\""
)
# A failing test that floods stdout, prints the secret it was given and says what went wrong.
FAIL = (
    "node -e \"for(let i=0;i<2000;i++)console.log('noise '+i);"
    "console.log('token='+process.env.DEPLOY_TOKEN);"
    "console.error('the real error');process.exit(3)\""
)
TOOLS = {
    "listTasks",
    "getConfig",
    "planTasks",
    "runTasks",
    "getRunHistory",
    "getFailures",
    "getTaskLog",
    "whyDidThisRerun",
    "explainCacheKey",
    "getCacheStats",
    "pruneCache",
    "planInit",
    "getWorkspaceInfo",
}


def cached(command, deps=()):
    return {
        "exec": {"command": command},
        "dependsOn": list(deps),
        "cache": {"inputs": {"files": ["*.json", "src/**"]}, "outputs": {"files": ["dist/**"]}},
    }


def workspace(repo):
    repo.write(
        npm_workspace(
            {
                "lib": {"tasks": {"build": cached(OK)}, "files": {"src/a.js": "1"}},
                "docs": {},  # scripts only, no vx config: what `vx init` writes one for
                "app": {
                    "deps": ["lib"],
                    "tasks": {
                        "build": {
                            **cached(OK, ["^build"]),
                            "exec": {
                                "command": OK,
                                "env": {"define": {"API_TOKEN": "abc", "MODE": "prod"}},
                            },
                        },
                        "test": {
                            "exec": {
                                "command": FAIL,
                                "env": {"passThrough": ["DEPLOY_TOKEN"]},
                            },
                            "dependsOn": ["build"],
                        },
                    },
                },
            }
        )
    )
    repo.write(
        {"packages/docs/package.json": {"name": "docs", "scripts": {"build": "node -e 1"}}}
    ).commit()


def server_env() -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("VX_", "CI"))}
    return {**keep, "PYTHONPATH": SRC, "NO_COLOR": "1", "DEPLOY_TOKEN": SECRET}


def session_run(repo, body):
    """Start `vx mcp` in the workspace through the SDK's stdio client and run `body(session)`."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "vx", "mcp"], cwd=str(repo.root), env=server_env()
    )
    out: dict = {}

    async def main():
        with open(repo.root.parent / "mcp-stderr.txt", "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    out["init"] = await session.initialize()
                    out["value"] = await body(session)

    anyio.run(main)
    return out


def data(result):
    assert not result.is_error, result.content[0].text
    return json.loads(result.content[0].text)


@pytest.mark.feature("PL-11")
def test_an_sdk_client_lists_calls_and_reads_back_a_run(repo):
    """Every run remembered and explained: an agent's MCP client initializes, lists the tools,
    calls each, runs tasks and reads the run back (history, failures, the failed task's log, why
    a task re-ran) — the secret a task printed masked everywhere, the stream never corrupted."""
    workspace(repo)

    async def body(session):
        got = {}
        await session.send_ping()
        got["tools"] = (await session.list_tools()).tools
        got["list"] = data(await session.call_tool("listTasks", {}))
        got["config"] = data(await session.call_tool("getConfig", {"name": "app#build"}))
        got["plan"] = data(await session.call_tool("planTasks", {"tasks": ["build"], "all": True}))
        got["empty_history"] = data(await session.call_tool("getRunHistory", {}))
        got["run"] = data(await session.call_tool("runTasks", {"tasks": ["app#test"]}))
        got["history"] = data(await session.call_tool("getRunHistory", {"limit": 5}))
        got["failures"] = data(await session.call_tool("getFailures", {}))
        got["log"] = data(await session.call_tool("getTaskLog", {"task": "app#test"}))
        (repo.root / "packages/lib/src/a.js").write_text("2")  # lib's build re-runs, and app's
        got["rerun"] = data(await session.call_tool("runTasks", {"tasks": ["app#build"]}))
        got["why"] = data(await session.call_tool("whyDidThisRerun", {"task": "app#build"}))
        got["key"] = data(await session.call_tool("explainCacheKey", {"task": "lib#build"}))
        got["stats"] = data(await session.call_tool("getCacheStats", {}))
        got["info"] = data(await session.call_tool("getWorkspaceInfo", {}))
        got["prune"] = data(await session.call_tool("pruneCache", {"dryRun": True}))
        got["init"] = data(await session.call_tool("planInit", {}))
        got["bad"] = await session.call_tool("getRunHistory", {"limit": "5"})
        got["bad_bool"] = await session.call_tool("runTasks", {"tasks": ["build"], "force": 1})
        got["unknown_arg"] = await session.call_tool("listTasks", {"projects": "app"})
        got["no_task"] = await session.call_tool("getTaskLog", {"task": "app#nope"})
        got["unknown_task"] = await session.call_tool("runTasks", {"tasks": ["app#deploy"]})
        got["after"] = data(await session.call_tool("listTasks", {"project": "app"}))
        return got

    out = session_run(repo, body)
    got = out["value"]
    # The SDK offers a newer revision than vx speaks: vx answers with its newest.
    assert out["init"].protocol_version == "2025-06-18"
    assert out["init"].server_info.name == "vx"
    assert {t.name for t in got["tools"]} == TOOLS
    assert all(t.input_schema["type"] == "object" for t in got["tools"])

    projects = {p["name"]: p for p in got["list"]["projects"]}
    assert projects["app"]["tasks"] == ["build", "test"] and projects["app"]["dependencies"] == [
        "lib"
    ]
    assert got["config"]["tasks"]["build"]["exec"]["env"]["define"] == {
        "API_TOKEN": "***",
        "MODE": "prod",
    }
    planned = {t["id"]: t["predicted"] for t in got["plan"]["tasks"]}
    assert planned == {"lib#build": "miss", "app#build": "miss"}
    assert got["empty_history"] == {"runs": []}

    run = got["run"]
    assert run["ok"] is False and run["exitCode"] == 1
    statuses = {t["id"]: t["status"] for t in run["tasks"]}
    assert statuses == {"lib#build": "success", "app#build": "success", "app#test": "failed"}
    assert run["rerun"] == "vx run app#test"
    assert "the real error" in run["output"] and SECRET not in run["output"]

    runs = got["history"]["runs"]
    assert [r["run_id"] for r in runs] == [run["run"]["run_id"]]
    assert runs[0]["failed_count"] == 1 and runs[0]["exit_ok"] is False
    assert got["failures"]["run"]["run_id"] == run["run"]["run_id"]
    assert [t["id"] for t in got["failures"]["failures"]] == ["app#test"]
    log = got["log"]
    assert log["task"] == "app#test" and log["run"] == run["run"]["run_id"]
    assert "the real error" in log["log"] and "noise 1999" in log["log"]
    assert "token=***" in log["log"] and SECRET not in json.dumps(
        [v for v in got.values() if isinstance(v, dict)]
    )

    rerun = {t["id"]: t["status"] for t in got["rerun"]["tasks"]}
    assert got["rerun"]["ok"] is True and rerun == {"lib#build": "success", "app#build": "success"}
    assert got["why"]["verdict"] == "changed"
    assert {"kind": "upstream", "what": "lib#build"} in got["why"]["differences"]
    key = got["key"]
    assert key["recorded"] and key["components"]["files"] == [
        f"packages/lib/{name}" for name in ("package.json", "src/a.js", "vx.config.json")
    ]
    assert key["key"] == next(t["hash"] for t in got["rerun"]["tasks"] if t["id"] == "lib#build")
    assert got["stats"]["entries"] >= 2 and got["stats"]["recentRuns"]["runs"] == 2
    assert got["info"]["info"]["root"] == str(repo.root)
    assert got["prune"]["pruned"] is True and got["prune"]["dryRun"] is True
    assert "packages/docs/vx.config.json" in got["init"]["files"] + got["init"]["notes"]
    assert "would write 1 config file" in got["init"]["notes"]

    for bad, words in (
        (got["bad"], 'arguments.limit: expected an integer, got string "5"'),
        (got["bad_bool"], "arguments.force: expected a boolean, got integer 1"),
        (got["unknown_arg"], "unknown argument `projects`"),
        (got["no_task"], "`app#nope` is not a task of run"),
        (got["unknown_task"], "package `app` has no task `deploy`"),
    ):
        assert bad.is_error and words in bad.content[0].text, bad.content[0].text
    assert [p["name"] for p in got["after"]["projects"]] == ["app"]  # the server lived on


def raw_session(repo, lines: list[str]) -> list:
    """Every line `vx mcp` wrote to stdout for `lines`, each parsed as JSON (a line that is not
    JSON fails the test: stdout is the protocol's alone)."""
    proc = subprocess.run(
        [sys.executable, "-m", "vx", "mcp"],
        cwd=repo.root,
        env=server_env(),
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def request(id, method, params=None):
    return {
        "jsonrpc": "2.0",
        "id": id,
        "method": method,
        **({"params": params} if params is not None else {}),
    }


def call(id, name, arguments):
    return request(id, "tools/call", {"name": name, "arguments": arguments})


@pytest.mark.feature("PL-11")
def test_json_rpc_batches_revisions_and_protocol_errors(repo):
    """Every run remembered and explained: the JSON-RPC side — an old revision echoed, a batch
    answered as one array (its notification unanswered), a run's flood of task output kept off
    the stream, and malformed messages answered with the protocol's error codes."""
    workspace(repo)
    init = request(1, "initialize", {"protocolVersion": "2024-11-05", "capabilities": {}})
    replies = raw_session(
        repo,
        [
            json.dumps(init),
            json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            json.dumps(
                [
                    request(2, "ping"),
                    {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {}},
                    call(3, "runTasks", {"tasks": ["app#test"]}),
                ]
            ),
            "{not json",
            "[]",
            json.dumps(request(4, "tools/call", {"name": "noSuchTool", "arguments": {}})),
            json.dumps(request(5, "resources/list")),
            json.dumps({"jsonrpc": "1.0", "id": 6, "method": "ping"}),
            json.dumps([init]),
            json.dumps(call(7, "getFailures", {"run": "zz"})),
            json.dumps(request(8, "ping")),
        ],
    )
    assert replies[0]["result"]["protocolVersion"] == "2024-11-05"
    batch = replies[1]
    assert [r["id"] for r in batch] == [2, 3] and batch[0]["result"] == {}
    ran = batch[1]["result"]
    assert ran["isError"] is False and "structuredContent" not in ran  # not in 2024-11-05
    assert json.loads(ran["content"][0]["text"])["exitCode"] == 1
    codes = [(r["id"], r["error"]["code"]) for r in replies[2:7]]
    assert codes == [(None, -32700), (None, -32600), (4, -32602), (5, -32601), (6, -32600)]
    assert replies[7] == [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "error": {"code": -32600, "message": "initialize cannot be part of a batch"},
        }
    ]
    bad_run = replies[8]["result"]
    assert bad_run["isError"] and "arguments.run" in bad_run["content"][0]["text"]
    assert replies[9] == {"jsonrpc": "2.0", "id": 8, "result": {}}
    assert len(replies) == 10
