"""`vx mcp`'s own parts: the inputSchema check (never coercing), the JSON-RPC handling, and the
stdout that only protocol messages reach."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import msgspec
import pytest

from vx.cli.mcp import Server
from vx.cli.mcp_tools import Tools, check

SRC = str(Path(__file__).resolve().parents[3] / "src")
SCHEMA = {
    "type": "object",
    "properties": {
        "limit": {"type": "integer", "minimum": 1, "maximum": 10},
        "dry": {"type": "boolean"},
        "mode": {"type": "string", "enum": ["a", "b"]},
        "tasks": {"type": "array", "items": {"type": "string", "pattern": "^[^-]"}, "minItems": 1},
    },
    "required": ["tasks"],
    "additionalProperties": False,
}


@pytest.mark.feature("PL-11")
@pytest.mark.parametrize(
    "value, problem",
    [
        ({"tasks": ["build"], "limit": "5"}, 'args.limit: expected an integer, got string "5"'),
        ({"tasks": ["build"], "limit": True}, "args.limit: expected an integer, got boolean true"),
        ({"tasks": ["build"], "limit": 2.0}, "args.limit: expected an integer, got number 2.0"),
        ({"tasks": ["build"], "limit": 11}, "args.limit: 11 is above 10"),
        ({"tasks": ["build"], "dry": 1}, "args.dry: expected a boolean, got integer 1"),
        ({"tasks": ["build"], "dry": "true"}, 'args.dry: expected a boolean, got string "true"'),
        ({"tasks": ["build"], "mode": "c"}, 'args.mode: "c" is not one of a, b'),
        ({"tasks": "build"}, 'args.tasks: expected an array, got string "build"'),
        ({"tasks": []}, "args.tasks: needs at least 1 item(s)"),
        ({"tasks": ["--force"]}, 'args.tasks[0]: "--force" does not match ^[^-]'),
        ({"tasks": [None]}, "args.tasks[0]: expected a string, got null null"),
        ({}, "args: `tasks` is required"),
        (
            {"tasks": ["b"], "Limit": 1},
            "args: unknown argument `Limit` (known: limit, dry, mode, tasks)",
        ),
        ({"tasks": ["build"], "limit": 3, "dry": False, "mode": "a"}, None),
    ],
)
def test_arguments_are_checked_against_the_schema_and_never_coerced(value, problem):
    """Every run remembered and explained: a tool's arguments are held to its inputSchema as
    they are — a string is no number, a number no boolean — and the first problem is named."""
    assert check(SCHEMA, value, "args") == problem


class OneTool:
    """The tool table's surface the server uses, with one tool that fails if asked to."""

    def listed(self):
        return [{"name": "echo", "inputSchema": {"type": "object"}}]

    def has(self, name):
        return name == "echo"

    def call(self, name, arguments):
        if arguments.get("boom"):
            raise RuntimeError("boom")
        return {"echo": arguments}

    def failure(self, exc):
        return f"internal error: {exc}"


def exchange(server, message):
    reply = server.handle_line(json.dumps(message).encode())
    return None if reply is None else msgspec.json.decode(reply)


@pytest.mark.feature("PL-11")
def test_json_rpc_ids_notifications_and_a_tool_that_raises():
    """Every run remembered and explained: a boolean id is refused, a notification and a client's
    response are not answered, and a tool that raises is an error result, not the server's end."""
    server = Server(OneTool())
    assert exchange(server, {"jsonrpc": "2.0", "id": True, "method": "ping"})["error"] == {
        "code": -32600,
        "message": "id must be a string or an integer",
    }
    assert exchange(server, {"jsonrpc": "2.0", "method": "notifications/initialized"}) is None
    assert exchange(server, {"jsonrpc": "2.0", "id": 9, "result": {}}) is None
    assert exchange(server, [{"jsonrpc": "2.0", "method": "x"}]) is None  # a batch of notifications
    init = {"protocolVersion": "2025-06-18", "capabilities": {}}
    exchange(server, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
    call = {"jsonrpc": "2.0", "id": "a", "method": "tools/call"}
    ok = exchange(server, {**call, "params": {"name": "echo", "arguments": {"x": 1}}})
    assert ok["result"]["structuredContent"] == {"echo": {"x": 1}}
    failed = exchange(server, {**call, "params": {"name": "echo", "arguments": {"boom": True}}})
    assert failed["result"] == {
        "content": [{"type": "text", "text": "internal error: boom"}],
        "isError": True,
    }
    assert (
        exchange(server, {**call, "params": {"name": "echo", "arguments": []}})["error"]["code"]
        == -32602
    )


@pytest.mark.feature("PL-11")
def test_a_stray_print_or_child_output_never_reaches_the_protocol_stream(tmp_path):
    """Every run remembered and explained: whatever a tool prints to stdout, or a process it
    starts writes to fd 1, lands on stderr; stdout carries the protocol's lines alone."""
    program = textwrap.dedent(
        """
        import os, sys
        from pathlib import Path
        from vx.cli import mcp_tools
        from vx.cli.args import Args
        from vx.cli.mcp import mcp_verb

        def noisy(self, a):
            print("stray print", flush=True)
            os.system("echo child output")
            return {"fine": True}

        mcp_tools.Tools.list_tasks = noisy
        sys.exit(mcp_verb(Args({}), ["mcp"]))
        """
    )
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "x"}},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "listTasks"}},
    ]
    done = subprocess.run(
        [sys.executable, "-c", program],
        input="".join(json.dumps(m) + "\n" for m in lines),
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    replies = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["id"] for r in replies] == [1, 2]
    assert replies[0]["result"]["protocolVersion"] == "2025-06-18"  # an unknown one: the newest
    assert json.loads(replies[1]["result"]["content"][0]["text"]) == {"fine": True}
    assert "stray print" in done.stderr and "child output" in done.stderr


@pytest.mark.feature("PL-11")
def test_tools_mask_the_servers_secret_values(tmp_path):
    """Every run remembered and explained: a secret value of the server's environment is masked
    in every string a tool returns."""
    tools = Tools(tmp_path, {"NPM_TOKEN": "abcdef123", "PATH": "/usr/bin"})
    assert tools.masked({"out": ["x abcdef123 y"], "n": 1}) == {"out": ["x *** y"], "n": 1}
