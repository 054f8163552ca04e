"""OpenTelemetry export, a plugin vx ships (`"plugins": ["vx.plugins.otel"]`): each run as one
trace, a few delta metrics and each executed task's output tail as a log record, sent as
OTLP/HTTP JSON with the standard library (no SDK).

The trace has a `vx.run` root span carrying the CI/CD and VCS semantic-convention attributes,
and one `vx.task` span per task (cache source, key, CPU, peak RSS, exit code, violations). The
export happens once the run is over, with one deadline for every request, so a collector that
is down or slow costs the run at most that deadline and one warning; it never fails a build.
Without an endpoint (option or OTEL_EXPORTER_OTLP_ENDPOINT) the plugin declines and costs nothing.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any, Mapping
from urllib.parse import unquote, urlsplit, urlunsplit

from vx.events import RunFinished, RunStarted, TaskFinished, TaskStarted
from vx.model import CacheStatus, RunSummary, Status, TaskResult
from vx.plugins.host import PluginError

OPTIONS = ("endpoint", "serviceName", "headers", "metrics", "logs", "timeout")
LOG_TAIL = 8192  # the characters of an executed task's output a log record keeps: its end
SEVERITY_INFO, SEVERITY_ERROR = 9, 17
DEFAULT_TIMEOUT_MS = 2000  # one deadline for the whole export
MAX_TIMEOUT_MS = 2500  # below the 3 s a teardown may hold the end of a run
SPAN_KIND_INTERNAL = 1
STATUS_OK, STATUS_ERROR = 1, 2
DELTA = 1  # AGGREGATION_TEMPORALITY_DELTA
SCOPE = "vx.plugins.otel"


def plugin(options: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        from vx.errors import suggestion

        raise PluginError(
            f"plugin 'vx.plugins.otel': unknown option `{unknown[0]}`",
            hint=suggestion(unknown[0], OPTIONS, noun="options"),
        )
    run = Export()

    def telemetry(ctx) -> Any:
        run.configure(options, ctx.env, ctx.root)
        return run.sink if run.traces_url else None  # no endpoint: declined, nothing kept

    def teardown(ctx) -> None:
        if run.traces_url and run.summary is not None:
            problem = run.send()
            if problem:
                ctx.warn(problem)

    return {"telemetry": telemetry, "teardown": teardown}


class Export:
    """What one run sends: kept from its events, encoded and posted at its end."""

    def __init__(self) -> None:
        self.traces_url: str | None = None
        self.metrics_url: str | None = None
        self.logs_url: str | None = None
        self.headers: dict[str, str] = {}
        self.timeout_s = DEFAULT_TIMEOUT_MS / 1000
        self.service = "vx"
        self.env: Mapping[str, str] = {}
        self.root = ""
        self.started: dict[str, int] = {}  # task id -> when its first attempt started (ns)
        # (result, when it was told (ns), its span's id)
        self.finished: list[tuple[TaskResult, int, str]] = []
        self.trace_id, self.parent, self.root_id = "", "", ""
        self.summary: RunSummary | None = None
        self.requested: tuple[str, ...] = ()

    def configure(self, options: Mapping[str, Any], env: Mapping[str, str], root) -> None:
        self.env, self.root = env, str(root)
        base = options.get("endpoint") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        self.traces_url = _signal_url(base, env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), "traces")
        if options.get("metrics", True) is not False:
            self.metrics_url = _signal_url(
                base, env.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"), "metrics"
            )
        if options.get("logs", True) is not False:
            self.logs_url = _signal_url(base, env.get("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"), "logs")
        self.trace_id, self.parent = _trace_parent(env.get("TRACEPARENT", ""))
        self.root_id = _span_id()
        self.service = str(options.get("serviceName") or env.get("OTEL_SERVICE_NAME") or "vx")
        self.headers = _headers(env.get("OTEL_EXPORTER_OTLP_HEADERS", ""))
        self.headers.update({str(k): str(v) for k, v in (options.get("headers") or {}).items()})
        timeout = options.get("timeout") or env.get("OTEL_EXPORTER_OTLP_TIMEOUT")
        try:
            ms = float(timeout) if timeout is not None else DEFAULT_TIMEOUT_MS
        except ValueError:
            ms = DEFAULT_TIMEOUT_MS
        self.timeout_s = min(max(ms, 1.0), MAX_TIMEOUT_MS) / 1000

    def sink(self, event: Any) -> None:
        if isinstance(event, TaskStarted):
            self.started.setdefault(str(event.id), time.time_ns())
        elif isinstance(event, TaskFinished):
            self.finished.append((event.result, time.time_ns(), _span_id()))
        elif isinstance(event, RunStarted):
            self.requested = tuple(str(t) for t in event.graph.requested)
        elif isinstance(event, RunFinished):
            self.summary = event.summary

    # ------------------------------------------------------------ sending

    def send(self) -> str | None:
        """Post the trace (and the metrics); the one warning to give, or None."""
        assert self.summary is not None and self.traces_url is not None
        deadline = time.monotonic() + self.timeout_s
        posts = [(self.traces_url, self.traces())]
        if self.metrics_url:
            posts.append((self.metrics_url, self.metrics()))
        if self.logs_url and any(_executed(r) for r, _, _ in self.finished):
            posts.append((self.logs_url, self.logs()))
        for url, body in posts:
            problem = _post(url, body, self.headers, deadline)
            if problem:
                return f"{problem}; this run's telemetry was not exported"
        return None

    def resource(self) -> dict[str, Any]:
        from vx import __version__

        attrs: dict[str, Any] = {"service.name": self.service, "service.version": __version__}
        attrs["host.name"] = os.uname().nodename
        attrs["os.type"] = sys.platform
        for part in self.env.get("OTEL_RESOURCE_ATTRIBUTES", "").split(","):
            name, eq, value = part.partition("=")
            if eq and name.strip():
                attrs[name.strip()] = unquote(value.strip())
        return {"attributes": _attributes(attrs)}

    def traces(self) -> dict[str, Any]:
        summary = self.summary
        assert summary is not None
        trace_id, parent, root_id = self.trace_id, self.parent, self.root_id
        run_start, run_end = int(summary.started_at * 1e9), int(summary.ended_at * 1e9)
        result = _pipeline_result(summary)
        root = {
            "traceId": trace_id,
            "spanId": root_id,
            "parentSpanId": parent,
            "name": "vx.run",
            "kind": SPAN_KIND_INTERNAL,
            "startTimeUnixNano": str(run_start),
            "endTimeUnixNano": str(max(run_end, run_start)),
            "attributes": _attributes(
                {
                    **self.run_attributes(summary),
                    "cicd.pipeline.result": result,
                }
            ),
            "status": {"code": STATUS_OK if result == "success" else STATUS_ERROR},
        }
        spans = [root]
        for task, told, span_id in self.finished:
            end = told
            start = self.started.get(str(task.id), end - int(task.duration_ms * 1e6))
            failed = task.status is Status.FAILED
            span: dict[str, Any] = {
                "traceId": trace_id,
                "spanId": span_id,
                "parentSpanId": root_id,
                "name": "vx.task",
                "kind": SPAN_KIND_INTERNAL,
                "startTimeUnixNano": str(min(start, end)),
                "endTimeUnixNano": str(end),
                "attributes": _attributes(_task_attributes(task)),
                "status": {"code": STATUS_ERROR if failed else STATUS_OK},
            }
            if failed:
                span["status"]["message"] = task.reason or f"exit {task.exit_code}"
            spans.append(span)
        return {
            "resourceSpans": [
                {
                    "resource": self.resource(),
                    "scopeSpans": [{"scope": _scope(), "spans": spans}],
                }
            ]
        }

    def run_attributes(self, summary: RunSummary) -> dict[str, Any]:
        """The root span's CI/CD and VCS attributes (OpenTelemetry semantic conventions)."""
        from vx.store.runs import ci_provider, git_head

        env = self.env
        from vx.plugins.host import masked

        words = " ".join(a for a in sys.argv[1:] if not a.startswith("--summarize"))
        command = masked("vx " + words)  # forwarded arguments may spell a secret
        attrs: dict[str, Any] = {
            "vx.run.id": summary.run_id,
            "vx.run.command": command.strip(),
            "vx.run.requested": ", ".join(self.requested),
            "vx.run.exit_code": summary.exit_code,
            "vx.run.interrupted": summary.interrupted,
            "cicd.pipeline.name": env.get("GITHUB_WORKFLOW") or env.get("CI_PIPELINE_NAME") or command,
            "cicd.pipeline.run.id": env.get("GITHUB_RUN_ID") or env.get("CI_PIPELINE_ID") or summary.run_id,
        }  # fmt: skip
        provider = ci_provider(env)
        if provider:
            attrs["cicd.provider.name"] = provider
        server, repo = env.get("GITHUB_SERVER_URL"), env.get("GITHUB_REPOSITORY")
        if server and repo:
            attrs["vcs.repository.url.full"] = f"{server}/{repo}"
            if env.get("GITHUB_RUN_ID"):
                attrs["cicd.pipeline.run.url.full"] = (
                    f"{server}/{repo}/actions/runs/{env['GITHUB_RUN_ID']}"
                )
        if env.get("GITHUB_JOB"):
            attrs["cicd.pipeline.task.name"] = env["GITHUB_JOB"]
        sha, branch = git_head(self.root)
        sha = env.get("GITHUB_SHA") or sha
        branch = env.get("GITHUB_HEAD_REF") or env.get("GITHUB_REF_NAME") or branch
        if sha:
            attrs["vcs.ref.head.revision"] = sha
        if branch:
            attrs["vcs.ref.head.name"] = branch
            attrs["vcs.ref.head.type"] = "tag" if env.get("GITHUB_REF_TYPE") == "tag" else "branch"
        if env.get("GITHUB_BASE_REF"):
            attrs["vcs.ref.base.name"] = env["GITHUB_BASE_REF"]
        return attrs

    def metrics(self) -> dict[str, Any]:
        """Delta sums for this run: tasks, failures, hits by source; and its duration."""
        summary = self.summary
        assert summary is not None
        start, end = str(int(summary.started_at * 1e9)), str(int(summary.ended_at * 1e9))
        results = [r for r, _, _ in self.finished]
        hits: dict[str, int] = {}
        for r in results:
            if r.status is Status.SUCCESS and r.cache in _HIT_SOURCES:
                hits[_HIT_SOURCES[r.cache]] = hits.get(_HIT_SOURCES[r.cache], 0) + 1

        def point(value: int, attrs: Mapping[str, Any] | None = None) -> dict[str, Any]:
            return {
                "startTimeUnixNano": start,
                "timeUnixNano": end,
                "asInt": str(value),
                "attributes": _attributes(attrs or {}),
            }

        def counter(name: str, unit: str, points: list[dict[str, Any]]) -> dict[str, Any]:
            return {
                "name": name,
                "unit": unit,
                "sum": {"dataPoints": points, "aggregationTemporality": DELTA, "isMonotonic": True},
            }

        duration_ms = (summary.ended_at - summary.started_at) * 1000
        metrics = [
            counter("vx.tasks.total", "{task}", [point(len(results))]),
            counter(
                "vx.tasks.failed",
                "{task}",
                [point(sum(r.status is Status.FAILED for r in results))],
            ),
            counter(
                "vx.tasks.cache_hits",
                "{task}",
                [point(n, {"source": source}) for source, n in sorted(hits.items())],
            ),
            {
                "name": "vx.run.duration_ms",
                "unit": "ms",
                "histogram": {
                    "dataPoints": [
                        {
                            "startTimeUnixNano": start,
                            "timeUnixNano": end,
                            "count": "1",
                            "sum": duration_ms,
                            "bucketCounts": ["1"],
                            "explicitBounds": [],
                            "attributes": _attributes({"cicd.pipeline.result": _pipeline_result(summary)}),
                        }
                    ],
                    "aggregationTemporality": DELTA,
                },
            },
        ]  # fmt: skip
        return {
            "resourceMetrics": [
                {
                    "resource": self.resource(),
                    "scopeMetrics": [{"scope": _scope(), "metrics": metrics}],
                }
            ]
        }

    def logs(self) -> dict[str, Any]:
        """One record per executed task: the end of its output, in its span."""
        records = []
        for task, told, span_id in self.finished:
            if not _executed(task):
                continue
            text = b"".join(c.data for c in task.log).decode("utf-8", "replace")
            failed = task.status is Status.FAILED
            records.append(
                {
                    "timeUnixNano": str(told),
                    "observedTimeUnixNano": str(told),
                    "severityNumber": SEVERITY_ERROR if failed else SEVERITY_INFO,
                    "severityText": "ERROR" if failed else "INFO",
                    "body": {"stringValue": text[-LOG_TAIL:]},
                    "attributes": _attributes(
                        {
                            "vx.task.id": str(task.id),
                            "vx.task.status": task.status.value,
                            "vx.log.truncated": len(text) > LOG_TAIL,
                        }
                    ),
                    "traceId": self.trace_id,
                    "spanId": span_id,
                }
            )
        return {
            "resourceLogs": [
                {
                    "resource": self.resource(),
                    "scopeLogs": [{"scope": _scope(), "logRecords": records}],
                }
            ]
        }


def _executed(task: TaskResult) -> bool:
    """Whether the task ran this time (not served from a cache) and printed something."""
    return (
        task.cache in (CacheStatus.MISS, CacheStatus.NO_CACHE)
        and task.attempts > 0
        and bool(task.log)
    )


_HIT_SOURCES = {
    CacheStatus.LOCAL: "local",
    CacheStatus.REMOTE: "remote",
    CacheStatus.UP_TO_DATE: "up-to-date",
}


def _task_attributes(task: TaskResult) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        "vx.task.id": str(task.id),
        "vx.project": task.id.package,
        "vx.task.name": task.id.task,
        "vx.task.status": task.status.value,
        "vx.cache.source": task.cache.value,
        "vx.task.attempts": task.attempts,
        "vx.task.timed_out": task.timed_out,
        "vx.task.sandbox_violations": len(task.violations),
        "cicd.pipeline.task.run.result": _task_result(task),
    }
    optional = {
        "vx.task.key": task.key,
        "vx.task.exit_code": task.exit_code,
        "vx.task.cpu_ms": task.cpu_ms,
        "vx.task.peak_rss_bytes": task.peak_rss_bytes,
        "vx.task.blocked_by": str(task.blocked_by) if task.blocked_by is not None else None,
        "vx.task.reason": task.reason,
    }
    attrs.update({k: v for k, v in optional.items() if v is not None})
    return attrs


def _task_result(task: TaskResult) -> str:
    return {
        Status.SUCCESS: "success",
        Status.FAILED: "failure",
        Status.SKIPPED: "skip",
        Status.ABORTED: "cancellation",
    }[task.status]


def _pipeline_result(summary: RunSummary) -> str:
    if summary.interrupted:
        return "cancellation"
    return "success" if summary.exit_code == 0 else "failure"


def _attributes(values: Mapping[str, Any]) -> list[dict[str, Any]]:
    """OTLP JSON key-values: a bool, an int (as a decimal string: int64), a float or a string."""
    out = []
    for key, value in values.items():
        if isinstance(value, bool):
            encoded: dict[str, Any] = {"boolValue": value}
        elif isinstance(value, int):
            encoded = {"intValue": str(value)}
        elif isinstance(value, float):
            encoded = {"doubleValue": value}
        else:
            encoded = {"stringValue": str(value)}
        out.append({"key": key, "value": encoded})
    return out


def _scope() -> dict[str, str]:
    from vx import __version__

    return {"name": SCOPE, "version": __version__}


def _span_id() -> str:
    return os.urandom(8).hex()


def _trace_parent(header: str) -> tuple[str, str]:
    """The trace id and parent span of a W3C `TRACEPARENT` (a CI job that traces itself), else a
    new trace with no parent."""
    parts = header.strip().split("-")
    if (
        len(parts) >= 4
        and len(parts[1]) == 32
        and len(parts[2]) == 16
        and all(c in "0123456789abcdef" for c in parts[1] + parts[2])
        and parts[1] != "0" * 32
        and parts[2] != "0" * 16
    ):
        return parts[1], parts[2]
    return os.urandom(16).hex(), ""


def _signal_url(base: str | None, specific: str | None, signal: str) -> str | None:
    """Where one signal goes: its own variable's URL as given, else `<base>/v1/<signal>`."""
    if specific:
        return specific
    if not base:
        return None
    return base.rstrip("/") + f"/v1/{signal}"


def _headers(text: str) -> dict[str, str]:
    """OTEL_EXPORTER_OTLP_HEADERS: `name=value` pairs, comma-separated, values URL-encoded."""
    out = {}
    for part in text.split(","):
        name, eq, value = part.partition("=")
        if eq and name.strip():
            out[name.strip()] = unquote(value.strip())
    return out


def masked(url: str) -> str:
    """A URL fit for a warning: user and password shown as ***, the query left out."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if parts.port:
            host = f"{host}:{parts.port}"
        if parts.username or parts.password:
            host = f"***@{host}"
        return urlunsplit((parts.scheme, host, parts.path, "", ""))
    except ValueError:
        return "(an unreadable URL)"


def _post(
    url: str, body: dict[str, Any], headers: Mapping[str, str], deadline: float
) -> str | None:
    """POST one OTLP JSON request before `deadline`; what went wrong, or None."""
    import base64
    import urllib.error
    import urllib.request

    left = deadline - time.monotonic()
    shown = masked(url)
    if left <= 0:
        return f"the OpenTelemetry collector at {shown} did not answer in time"
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"the OpenTelemetry endpoint {shown} is not an http(s) URL"
    request = urllib.request.Request(
        urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, parts.query, "")),
        data=json.dumps(body, separators=(",", ":")).encode(),
        method="POST",
        headers={"Content-Type": "application/json", **headers},
    )
    if parts.username:  # credentials in the URL travel as basic auth, never in a message
        token = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
        request.add_header("Authorization", "Basic " + base64.b64encode(token).decode())
    try:
        with urllib.request.urlopen(request, timeout=left) as response:
            response.read()
    except urllib.error.HTTPError as exc:
        return f"the OpenTelemetry collector at {shown} answered HTTP {exc.code}"
    except (OSError, ValueError) as exc:  # refused, unreachable, timed out, TLS
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, TimeoutError) or "timed out" in str(reason):
            return f"the OpenTelemetry collector at {shown} did not answer in time"
        return f"the OpenTelemetry collector at {shown} could not be reached ({reason})"
    return None
