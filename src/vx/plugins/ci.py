"""`vx.plugins.ci`: a run on GitHub Actions reported to GitHub — the job summary, a check run
when `GITHUB_TOKEN` is set — and its cache scope taken from the ref. Off Actions it declines: no
hook does anything. The work is `vx.report.github`'s; this module is its place in the seam.

    "plugins": [{"name": "vx.plugins.ci", "options": {"title": "Build", "checkName": "vx"}}]

Options: `summaryFile` (default `$GITHUB_STEP_SUMMARY`), `title`, `checks` (default true),
`checkName` (default "vx"), `cacheScope` (default true: set the run's `cacheScope` from the ref
when the workspace config sets none).
"""

from __future__ import annotations

from typing import Any

from vx.events import RunFinished
from vx.report import github


def plugin(options: dict[str, Any]) -> dict[str, Any]:
    settings = github.options_of(options)
    if isinstance(settings, str):
        raise ValueError(settings)
    chosen: github.GitHubOptions = settings

    def config(ws: dict, ctx) -> dict:
        return github.scoped(ws, ctx.env, chosen)

    def telemetry(ctx):
        if not github.on_actions(ctx.env):
            return None  # declines: nothing to report to

        def sink(event: Any) -> None:
            if isinstance(event, RunFinished):
                for warning in github.finished(event.summary, ctx.env, chosen):
                    ctx.warn(warning)

        return sink

    return {"config": config, "telemetry": telemetry}
