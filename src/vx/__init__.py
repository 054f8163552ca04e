"""vx: a fast, correct task runner and build cache for JavaScript monorepos."""

__version__ = "0.1.0"

# Bumped on purpose whenever the key fold or the artifact container changes. Here, not
# in vx.model, because the artifact reader checks it without loading any record.
CACHE_VERSION = "vx-py-cache-v1"
