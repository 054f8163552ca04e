"""Measure what a sandboxed task pays for `allow.network` hosts (SB-08); prints medians.

1. fixed cost per task: `bwrap … sh -c true` against the same with vx's socat bridge (started
   outside the sandbox in its network namespace, the task waiting at its gate), and against a
   minimal Python bridge inside (the alternative we did not take);
2. per request: curl to a loopback origin directly against through the proxy (plain HTTP,
   CONNECT, SOCKS5), via a socat bridge like the one inside the sandbox;
3. throughput of one 64 MiB download through a CONNECT tunnel against direct.

Rounds are interleaved so that load on the machine hits every configuration alike.
Usage: python bench/network_bridge.py [ROUNDS]
"""

from __future__ import annotations

import http.server
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from vx.sandbox.bridges import Gate, InsideBridges, gate_prelude  # noqa: E402
from vx.sandbox.proxy import Proxy  # noqa: E402

MINI_PY_BRIDGE = (
    "import _socket, os\n"
    "s=_socket.socket(_socket.AF_INET,_socket.SOCK_STREAM);s.bind(('127.0.0.1',3128));s.listen(64)\n"
    "if os.fork(): os._exit(0)\n"
)  # only bind + fork: a lower bound for any Python bridge (the relay loop costs more imports)


class Origin(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        size = int(self.path.strip("/") or 2)
        self.send_response(200)
        self.send_header("Content-Length", str(size))
        self.end_headers()
        chunk = b"x" * min(size, 1 << 20)
        left = size
        while left:
            self.wfile.write(chunk[:left])
            left -= min(left, len(chunk))

    def log_message(self, *args) -> None:
        pass


def timed(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return (time.perf_counter() - started) * 1000


def timed_bridged(sock: Path, scratch: Path) -> float:
    """`bwrap … sh -c '<gate> true'` with the bridge vx starts outside, as the sandbox runner does."""
    started = time.perf_counter()
    gate = Gate(scratch / f"gate-{time.perf_counter_ns()}")
    status_r, status_w = os.pipe()
    argv = bwrap(sock, gate_prelude(gate.path) + " true")
    argv[argv.index("--unshare-all") : argv.index("--unshare-all")] = [
        "--ro-bind",
        gate.path,
        gate.path,
        "--json-status-fd",
        str(status_w),
    ]
    box = subprocess.Popen(argv, pass_fds=(status_w,), stdout=subprocess.DEVNULL)
    os.close(status_w)
    status = os.fdopen(status_r)
    bridge = InsideBridges(
        shutil.which("socat") or "socat",
        shutil.which("nsenter") or "nsenter",
        proxy_socket=str(sock),
        proxy_port=3128,
        ports=(),
    )
    try:
        gate.say(
            "go" if bridge.open(json.loads(status.readline())["child-pid"]) is None else "fail"
        )
        if box.wait() != 0:
            raise SystemExit("the bridged sandbox failed")
    finally:
        bridge.stop()
        gate.close()
        status.close()
        os.unlink(gate.path)
    return (time.perf_counter() - started) * 1000


def bwrap(sock: Path, script: str, *args: str) -> list[str]:
    return [
        "bwrap",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
        "--ro-bind",
        str(sock),
        str(sock),
        "--unshare-all",
        "--cap-drop",
        "ALL",
        "--die-with-parent",
        "--new-session",
        "--",
        "/bin/sh",
        "-c",
        script,
        *args,
    ]


def socat_port(sock: Path) -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen(
        [
            "socat",
            "-d",
            "-d",
            "TCP-LISTEN:0,bind=127.0.0.1,fork,reuseaddr,nodelay",
            f"UNIX-CONNECT:{sock}",
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    port = int(re.search(r":(\d+)$", proc.stderr.readline().strip()).group(1))
    threading.Thread(target=proc.stderr.read, daemon=True).start()
    return proc, port


def report(name: str, samples: list[float], base: list[float] | None = None) -> None:
    med = statistics.median(samples)
    extra = f"  (+{med - statistics.median(base):.1f} ms)" if base else ""
    print(f"  {name:34s} {med:8.1f} ms{extra}")


def main(rounds: int) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Origin)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    origin = server.server_address[1]
    with tempfile.TemporaryDirectory() as tmp, Proxy(Path(tmp)) as proxy:
        sock = proxy.start(["127.0.0.1"])
        configs = {
            "bwrap sh -c true": bwrap(sock, "true"),
            "+ socat bridge outside, gate (vx)": None,
            "+ minimal python bridge": bwrap(
                sock, '/usr/bin/python3 -I -S -c "$0"', MINI_PY_BRIDGE
            ),
        }
        bridge, port = socat_port(sock)
        url = f"http://127.0.0.1:{origin}/2"
        curl = ["curl", "-sS", "--noproxy", "", "-o", "/dev/null"]
        requests = {
            "curl direct": [*curl, url],
            "curl via proxy (plain HTTP)": [*curl, "-x", f"http://127.0.0.1:{port}", url],
            "curl via proxy (CONNECT)": [*curl, "-p", "-x", f"http://127.0.0.1:{port}", url],
            "curl via proxy (SOCKS5)": [*curl, "-x", f"socks5h://127.0.0.1:{port}", url],
        }
        big = f"http://127.0.0.1:{origin}/{64 << 20}"
        transfers = {
            "64 MiB direct": [*curl, big],
            "64 MiB via CONNECT": [*curl, "-p", "-x", f"http://127.0.0.1:{port}", big],
        }
        samples = {name: [] for name in [*configs, *requests, *transfers]}
        for _ in range(rounds):
            for table in (configs, requests, transfers):
                for name, argv in table.items():
                    samples[name].append(
                        timed(argv) if argv is not None else timed_bridged(sock, Path(tmp))
                    )
        bridge.terminate()
    server.shutdown()
    print(f"fixed cost per sandboxed task (median of {rounds}):")
    for name in configs:
        report(
            name, samples[name], None if name.startswith("bwrap") else samples["bwrap sh -c true"]
        )
    print("per request, wall (curl process included):")
    for name in requests:
        report(name, samples[name], None if name.endswith("direct") else samples["curl direct"])
    print("throughput:")
    for name in transfers:
        med = statistics.median(samples[name])
        print(f"  {name:34s} {med:8.1f} ms  ({64 / (med / 1000):.0f} MiB/s)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 30)
