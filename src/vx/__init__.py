"""vx: a fast, correct task runner and build cache for JavaScript monorepos."""

__version__ = "0.1.0"

# Bumped on purpose whenever the key fold or the artifact container changes. Here, not
# in vx.model, because the artifact reader checks it without loading any record.
CACHE_VERSION = "vx-py-cache-v1"


def __getattr__(name: str):
    """`vx.run`, `vx.plan_run` and `vx.Abort` (vx.api), imported on first use: `vx --version` and
    a replayed run load none of it."""
    if name in ("run", "plan_run", "Abort"):
        from vx import api

        return getattr(api, name)
    raise AttributeError(f"module 'vx' has no attribute {name!r}")
