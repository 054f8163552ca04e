"""Run a task inside a kernel sandbox and name every access it made outside its grants.

bubblewrap enforces (a read outside the grants fails *now*), strace explains (which file,
and which grant would allow it). Modules: `grants` (config -> what may be touched),
`mounts` (-> bwrap argv), `trace` (strace lines -> accesses), `violations` (accesses vs
grants), `probe` (which tools work here), `runner` (one task, end to end).

Nothing here is imported unless a task declares `exec.sandbox` or `vx info` asks.
"""

from __future__ import annotations


def sandbox_status() -> str:
    """Say what the sandbox can do on this machine, for `vx info`: `bwrap 0.8.0 (traced: strace 6.1)`."""
    from vx.sandbox.probe import probe

    return probe().status
