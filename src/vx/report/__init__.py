"""Render a run for people and for scripts: live console, plain lines, JSON summary, `--dry`.

Reporters subscribe to events and never call back into the core. Nothing is imported here:
callers import the module they need (`vx.report.reporters`, `vx.report.dry`, ...).
"""
