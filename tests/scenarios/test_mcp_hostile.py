"""`vx mcp` fed what an agent with untrusted text in its context might send: task arguments
next to flags, and messages built to break the server rather than to ask it anything."""

import json
import subprocess
import sys

import pytest
from support.workspace import npm_workspace
from test_mcp import call, request, server_env

# Writes the arguments it was given to ran.json; cached, so only --force runs it twice.
RECORD = (
    "node -e \"require('fs').mkdirSync('dist',{recursive:true});"
    "require('fs').writeFileSync('dist/o','x');"
    "require('fs').writeFileSync('ran.json',JSON.stringify(process.argv.slice(1)))\""
)


def raw_replies(repo, lines: list[bytes]) -> list:
    """Every line `vx mcp` wrote to stdout for `lines`, each parsed as JSON; the server must
    end on its own when stdin ends, exit 0, and write nothing to stdout but protocol lines."""
    proc = subprocess.run(
        [sys.executable, "-m", "vx", "mcp"],
        cwd=repo.root,
        env=server_env(),
        input=b"\n".join(lines) + b"\n",
        capture_output=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-2000:]
    assert b"Traceback" not in proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def tool_data(reply: dict) -> dict:
    result = reply["result"]
    assert result["isError"] is False, result["content"][0]["text"]
    return json.loads(result["content"][0]["text"])


@pytest.mark.feature("PL-11")
def test_task_arguments_never_swallow_the_servers_own_flags(repo):
    """A tool's `args` are the tasks' words after `--`: planTasks with args must still be a dry
    run (it used to put `--dry=json` after `--`, so the task ran and the plan was an error), and
    runTasks with args must still get its --force and its summary (both used to land after
    `--`, as arguments of the task)."""
    repo.write(
        npm_workspace(
            {
                "lib": {
                    "tasks": {
                        "build": {
                            "exec": {"command": RECORD},
                            "cache": {
                                "inputs": {"files": ["*.json"]},
                                "outputs": {"files": ["dist/**"]},
                            },
                        }
                    }
                }
            }
        )
    ).commit()
    ran = repo.root / "packages/lib/ran.json"
    selection = {"tasks": ["lib#build"], "args": ["x"]}
    init = request(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}})

    plan = raw_replies(
        repo, [json.dumps(init).encode(), json.dumps(call(2, "planTasks", selection)).encode()]
    )
    assert not ran.exists(), "planTasks ran the task"
    assert [t["id"] for t in tool_data(plan[1])["tasks"]] == ["lib#build"]

    first, forced = raw_replies(
        repo,
        [
            json.dumps(init).encode(),
            json.dumps(call(2, "runTasks", selection)).encode(),
            json.dumps(call(3, "runTasks", {**selection, "force": True})).encode(),
        ],
    )[1:]
    assert json.loads(ran.read_text()) == ["x"]
    assert [t["status"] for t in tool_data(first)["tasks"]] == ["success"]
    forced = tool_data(forced)
    assert forced["ok"] is True and [t["status"] for t in forced["tasks"]] == ["success"]


@pytest.mark.feature("PL-11")
def test_hostile_messages_get_protocol_errors_and_the_server_lives(repo):
    """A JSON nesting bomb used to kill the server (RecursionError out of the decoder, exit 1);
    it, invalid UTF-8, a 10 MB line and a batch of 100,000 are each answered on the protocol's
    stream, and the server answers the next ping."""
    repo.write(npm_workspace({"lib": {}})).commit()
    replies = raw_replies(
        repo,
        [
            b"[" * 200_000 + b"]" * 200_000,
            b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"\xff\xfe"}}',
            b'{"jsonrpc":"2.0","id":2,"method":"ping","params":{"x":"' + b"a" * (10 << 20) + b'"}}',
            json.dumps([request(10 + i, "ping") for i in range(100_000)]).encode(),
            json.dumps(request(3, "ping")).encode(),
        ],
    )
    assert [r["error"]["code"] for r in replies[:2]] == [-32700, -32700]
    assert replies[2] == {"jsonrpc": "2.0", "id": 2, "result": {}}
    assert [r["id"] for r in replies[3]] == list(range(10, 100_010))
    assert replies[4] == {"jsonrpc": "2.0", "id": 3, "result": {}}
    assert len(replies) == 5
