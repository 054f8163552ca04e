"""vx: a fast, correct task runner and build cache for JavaScript monorepos."""

__version__ = "0.1.0"
