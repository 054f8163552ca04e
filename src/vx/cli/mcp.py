"""`vx mcp`: a Model Context Protocol server on stdin and stdout, so an agent can ask vx what it
would run, run it, and ask what happened and why — through the same code as `vx run`, `vx last`,
`vx why`, `vx show`, `vx info` and `vx cache prune` (the tools are in `vx.cli.mcp_tools`).

The wire is JSON-RPC 2.0, one message a line (a batch is a JSON array). Revisions 2024-11-05,
2025-03-26 and 2025-06-18 are spoken: `initialize` echoes the client's when it is one of them and
answers with the newest otherwise, as the protocol says. Requests are answered one at a time, in
order.

stdout carries protocol messages and nothing else: at start the protocol keeps its own copy of
the descriptor and fd 1 becomes stderr, so a stray print, a library's warning or a child process
cannot write into the stream; the protocol's stdin is kept the same way and fd 0 becomes
/dev/null, so no child can read from it.
"""

from __future__ import annotations

import os
import sys
from typing import Any, BinaryIO

import msgspec

from vx import __version__
from vx.cli.args import Args
from vx.errors import EXIT_OK, UsageError

REVISIONS = ("2025-06-18", "2025-03-26", "2024-11-05")  # newest first
STRUCTURED_FROM = "2025-06-18"  # the first revision with `structuredContent` in a tool's result

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

INSTRUCTIONS = (
    "vx is the workspace's task runner and build cache. listTasks and getConfig show what there "
    "is to run; planTasks says what a run would do (and which tasks are cache hits) without "
    "running anything; runTasks runs tasks; getRunHistory, getFailures and getTaskLog say what "
    "runs did; whyDidThisRerun and explainCacheKey say why a task's key changed and what it folds."
)


def mcp_verb(args: Args, argv: list[str]) -> int:
    from pathlib import Path

    from vx.cli.mcp_tools import Tools

    if args.names:
        raise UsageError(
            f"`vx mcp` takes no arguments, got `{args.names[0]}`",
            hint="an MCP client starts `vx mcp` in the workspace and speaks to it on stdin/stdout",
        )
    inp, out = _take_stdio()
    server = Server(Tools(Path(os.getcwd()), os.environ))
    serve(inp, out, server)
    return EXIT_OK


def _take_stdio() -> tuple[BinaryIO, BinaryIO]:
    """The protocol's own stdin and stdout; fd 0 becomes /dev/null and fd 1 stderr."""
    sys.stdout.flush()
    inp = os.fdopen(os.dup(0), "rb", buffering=0)
    out = os.fdopen(os.dup(1), "wb", buffering=0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    return inp, out


def serve(inp: BinaryIO, out: BinaryIO, server: Server) -> None:
    """Answer each line of `inp` on `out` until `inp` ends."""
    pending = b""
    while True:
        chunk = inp.read(1 << 16)
        if not chunk:
            break
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            _answer(line, out, server)
    _answer(pending, out, server)  # a last message without its newline


def _answer(line: bytes, out: BinaryIO, server: Server) -> None:
    if not line.strip():
        return
    reply = server.handle_line(line)
    if reply is not None:
        out.write(reply + b"\n")


def _error(id: Any, code: int, message: str) -> dict:
    return {"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}


def _result(id: Any, result: Any) -> dict:
    return {"jsonrpc": "2.0", "id": id, "result": result}


def _valid_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


class Server:
    """The JSON-RPC side: messages in, replies out; the tools do the work."""

    def __init__(self, tools):
        self.tools = tools
        self.revision: str | None = None

    def handle_line(self, line: bytes) -> bytes | None:
        """The encoded reply to one line, or None when there is nothing to answer."""
        try:
            message = msgspec.json.decode(line)
        except msgspec.DecodeError as exc:
            return msgspec.json.encode(_error(None, PARSE_ERROR, f"not JSON: {exc}"))
        except RecursionError:  # arrays in arrays past the decoder's depth: a hostile message
            return msgspec.json.encode(
                _error(None, PARSE_ERROR, "not JSON vx reads: nested too deep")
            )
        if isinstance(message, list):
            if not message:
                return msgspec.json.encode(_error(None, INVALID_REQUEST, "an empty batch"))
            replies = [r for r in (self.handle(m, batched=True) for m in message) if r is not None]
            return msgspec.json.encode(replies) if replies else None
        reply = self.handle(message)
        return None if reply is None else msgspec.json.encode(reply)

    def handle(self, message: Any, batched: bool = False) -> dict | None:
        """The reply to one message; None for a notification or a response."""
        if not isinstance(message, dict):
            return _error(None, INVALID_REQUEST, "a message is a JSON object")
        if "method" not in message and ("result" in message or "error" in message):
            return None  # a response; vx sends no requests, so there is nothing to match it to
        id = message.get("id")
        if message.get("jsonrpc") != "2.0":
            return _error(id if _valid_id(id) else None, INVALID_REQUEST, 'jsonrpc must be "2.0"')
        method = message.get("method")
        if not isinstance(method, str):
            return _error(id if _valid_id(id) else None, INVALID_REQUEST, "method must be a string")
        if "id" not in message:
            return None  # a notification (initialized, cancelled, …): nothing to answer
        if not _valid_id(id):
            return _error(None, INVALID_REQUEST, "id must be a string or an integer")
        params = message.get("params", {})
        if not isinstance(params, dict):
            return _error(id, INVALID_PARAMS, "params must be an object")
        if method == "initialize":
            if batched:
                return _error(id, INVALID_REQUEST, "initialize cannot be part of a batch")
            return self._initialize(id, params)
        if method == "ping":
            return _result(id, {})
        if method == "tools/list":
            return _result(id, {"tools": self.tools.listed()})
        if method == "tools/call":
            return self._call(id, params)
        return _error(id, METHOD_NOT_FOUND, f"no method `{method}`")

    def _initialize(self, id: Any, params: dict) -> dict:
        asked = params.get("protocolVersion")
        if not isinstance(asked, str):
            return _error(id, INVALID_PARAMS, "initialize needs protocolVersion, a string")
        self.revision = asked if asked in REVISIONS else REVISIONS[0]
        return _result(
            id,
            {
                "protocolVersion": self.revision,
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": "vx", "title": "vx", "version": __version__},
                "instructions": INSTRUCTIONS,
            },
        )

    def _call(self, id: Any, params: dict) -> dict:
        name, arguments = params.get("name"), params.get("arguments", {})
        if not isinstance(name, str):
            return _error(id, INVALID_PARAMS, "tools/call needs name, a string")
        if not self.tools.has(name):
            return _error(id, INVALID_PARAMS, f"no tool `{name}`; tools/list names them")
        if not isinstance(arguments, dict):
            return _error(id, INVALID_PARAMS, "arguments must be an object")
        try:
            data, failed = self.tools.call(name, arguments), False
        except Exception as exc:  # a tool's failure is its result, never the server's end
            data, failed = self.tools.failure(exc), True
        text = data if isinstance(data, str) else msgspec.json.encode(data).decode()
        result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": failed}
        if not failed and not isinstance(data, str) and (self.revision or "") >= STRUCTURED_FROM:
            result["structuredContent"] = data
        return _result(id, result)
