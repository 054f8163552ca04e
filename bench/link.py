#!/usr/bin/env python3
"""A network link on loopback: a TCP proxy that gives each direction a one-way delay and a
bandwidth, for measuring a remote cache as CI reaches it (this kernel has no `netem`).

    python bench/link.py --to 127.0.0.1:8080 --rtt-ms 20 --mbit 100

prints `port N` once listening on 127.0.0.1:N, then forwards every connection to `--to`. Bytes
are forwarded as a wire would carry them: a chunk read at time t starts onto the link when the
bytes before it have gone (serialisation at the bandwidth), and is delivered RTT/2 after it has
gone out. Each direction is shaped on its own, as a full-duplex link's are, and the queue in
front of the link holds at most two bandwidth-delay products (at least 256 KiB), so a sender
faster than the link is held back by TCP's flow control as it would be, instead of filling the
proxy's memory. HTTP/1.1, HTTP/2 and gRPC pass through unchanged (the proxy never parses).
A proxy of its own process, so its event loop never waits on the process that measures.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

CHUNK = 16 * 1024  # ~1.3 ms at 100 Mbit/s: fine enough that pacing looks like a stream


class Direction:
    """One direction of one connection: read, stamp when each chunk may arrive, deliver then."""

    def __init__(self, delay_s: float, bytes_per_s: float):
        self.delay, self.rate = delay_s, bytes_per_s
        bdp = int(bytes_per_s * delay_s * 2)
        self.queue: asyncio.Queue = asyncio.Queue(maxsize=max(16, 2 * bdp // CHUNK + 1))
        self.free_at = 0.0  # when the link has sent everything queued so far

    async def pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        loop = asyncio.get_running_loop()
        deliver = asyncio.create_task(self._deliver(writer))
        try:
            while data := await reader.read(CHUNK):
                start = max(loop.time(), self.free_at)
                self.free_at = start + len(data) / self.rate
                await self.queue.put((self.free_at + self.delay, data))
        except (ConnectionError, OSError):
            pass
        await self.queue.put((None, b""))  # end of stream, delivered after what came before
        await deliver

    async def _deliver(self, writer: asyncio.StreamWriter) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                at, data = await self.queue.get()
                if at is None:
                    if writer.can_write_eof():
                        writer.write_eof()
                    break
                wait = at - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass


async def serve(host: str, port: int, delay_s: float, bytes_per_s: float) -> None:
    async def connection(client_r, client_w) -> None:
        try:
            server_r, server_w = await asyncio.open_connection(host, port)
        except OSError:
            client_w.close()
            return
        # connecting costs one RTT on a real link (SYN, SYN-ACK) before the first byte can go
        await asyncio.sleep(2 * delay_s)
        up, down = Direction(delay_s, bytes_per_s), Direction(delay_s, bytes_per_s)
        await asyncio.gather(up.pump(client_r, server_w), down.pump(server_r, client_w))
        for w in (client_w, server_w):
            w.close()

    server = await asyncio.start_server(connection, "127.0.0.1", 0)
    print(f"port {server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--to", required=True, help="host:port to forward to")
    ap.add_argument("--rtt-ms", type=float, required=True, help="round-trip time added")
    ap.add_argument("--mbit", type=float, required=True, help="bandwidth each way, Mbit/s")
    args = ap.parse_args(argv)
    host, _, port = args.to.rpartition(":")
    try:
        asyncio.run(serve(host, int(port), args.rtt_ms / 2000, args.mbit * 1e6 / 8))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
