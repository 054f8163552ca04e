"""Run a task inside a kernel sandbox and name every access it made outside its grants.

bubblewrap enforces (a read outside the grants fails *now*), strace explains (which file,
and which grant would allow it). Modules: `grants` (config -> what may be touched),
`mounts` (-> bwrap argv), `trace` (strace lines -> accesses), `violations` (accesses vs
grants), `probe` (which tools work here), `runner` (one task, end to end).

Nothing here is imported unless a task declares `exec.sandbox` or `vx info` asks.
"""
