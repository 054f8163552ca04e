"""The OpenTelemetry plugin vx ships (`vx.plugins.otel`, docs/plugins.md#opentelemetry) against a
real OTLP/HTTP receiver on loopback: each request is decoded strictly into the
opentelemetry-proto messages (`json_format.Parse`, unknown fields refused), so a wrong shape
fails. Real git, real node, real `vx` processes."""

from __future__ import annotations

import base64
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from support.workspace import build_task, npm_workspace

pytest.importorskip("opentelemetry.proto.collector.trace.v1.trace_service_pb2")
from google.protobuf import json_format  # noqa: E402
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (  # noqa: E402
    ExportLogsServiceRequest,
)
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (  # noqa: E402
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (  # noqa: E402
    ExportTraceServiceRequest,
)


def otlp_json(body: bytes, message):
    """Decode OTLP/JSON as a collector does: ids are hex there (protobuf's JSON has base64), the
    rest is protobuf's JSON mapping, parsed strictly."""
    data = json.loads(body)
    spans = [
        s for rs in data.get("resourceSpans", []) for ss in rs["scopeSpans"] for s in ss["spans"]
    ]
    records = [
        r for rl in data.get("resourceLogs", []) for sl in rl["scopeLogs"] for r in sl["logRecords"]
    ]
    for item in spans + records:
        for field, size in (("traceId", 16), ("spanId", 8), ("parentSpanId", 8)):
            if item.get(field):
                raw = bytes.fromhex(item[field])
                assert len(raw) == size, (field, item[field])
                item[field] = base64.b64encode(raw).decode()
    return json_format.Parse(json.dumps(data), message)


class Receiver:
    """An OTLP/HTTP receiver on loopback keeping each decoded request by path."""

    def __init__(self):
        self.requests: list[tuple[str, dict, object]] = []
        got = self.requests

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                kind = {
                    "/v1/traces": ExportTraceServiceRequest,
                    "/v1/metrics": ExportMetricsServiceRequest,
                    "/v1/logs": ExportLogsServiceRequest,
                }
                assert self.headers["Content-Type"] == "application/json"
                got.append(
                    (
                        self.path,
                        {k.lower(): v for k, v in self.headers.items()},
                        otlp_json(body, kind[self.path]()),
                    )
                )
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def of(self, path: str):
        return [msg for p, _, msg in self.requests if p == path]


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.server.shutdown()


def workspace(repo, plugin_entry="vx.plugins.otel"):
    pkgs = {
        "a": {"tasks": {"build": build_task()}, "files": {"src/a.js": "A;"}},
        "b": {"deps": ["a"], "tasks": {"build": build_task()}, "files": {"src/b.js": "B;"}},
    }
    files = npm_workspace(pkgs)
    files["vx.workspace.json"] = {"plugins": [plugin_entry]}
    repo.write(files).commit()
    return repo


def attrs(kvs) -> dict:
    return {kv.key: json_format.MessageToDict(kv.value) for kv in kvs}


@pytest.mark.feature("PL-09")
def test_each_run_is_one_trace_with_a_span_per_task_and_delta_metrics(repo, receiver):
    """One trace per run: a `vx.run` root span with CI/CD and VCS attributes and one `vx.task`
    span per task with its cache source, key, CPU and RSS; delta metrics of tasks and hits; each
    executed task's output as a log record in its span (issue: OpenTelemetry plugin)."""
    workspace(repo)
    sha = repo.git("rev-parse", "HEAD").strip()
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_EXPORTER_OTLP_HEADERS": "x-team=web"}
    first = repo.vx("run", "build", env=env)
    assert first.code == 0, first.err
    assert "otel" not in first.err and "warning" not in first.err, first.err
    [trace] = receiver.of("/v1/traces")
    [rs] = trace.resource_spans
    assert attrs(rs.resource.attributes)["service.name"] == {"stringValue": "vx"}
    spans = [s for ss in rs.scope_spans for s in ss.spans]
    [root] = [s for s in spans if s.name == "vx.run"]
    tasks = {
        attrs(s.attributes)["vx.task.id"]["stringValue"]: s for s in spans if s.name == "vx.task"
    }
    assert set(tasks) == {"a#build", "b#build"}
    assert not root.parent_span_id and {s.trace_id for s in spans} == {root.trace_id}
    assert all(s.parent_span_id == root.span_id for s in tasks.values())
    run = attrs(root.attributes)
    assert run["cicd.pipeline.result"] == {"stringValue": "success"}
    assert run["vcs.ref.head.revision"] == {"stringValue": sha}
    assert run["vcs.ref.head.name"] == {"stringValue": "main"}
    assert run["vx.run.id"] == {"stringValue": first.summary["runId"]}
    a = attrs(tasks["a#build"].attributes)
    assert a["vx.cache.source"] == {"stringValue": "miss"}
    assert a["vx.task.key"] == {"stringValue": first.task("a#build")["hash"]}
    measured = []
    for tid, span in tasks.items():  # CPU and RSS as the run measured them
        row, got = first.task(tid), attrs(span.attributes)
        if "cpuMs" in row:
            measured.append(tid)
            assert float(got["vx.task.cpu_ms"]["doubleValue"]) == pytest.approx(
                row["cpuMs"], abs=0.01
            )
        if "peakRssBytes" in row:
            assert got["vx.task.peak_rss_bytes"] == {"intValue": str(row["peakRssBytes"])}
    assert measured, first.summary
    assert tasks["a#build"].end_time_unix_nano >= tasks["a#build"].start_time_unix_nano > 0
    headers = [h for p, h, _ in receiver.requests if p == "/v1/traces"][0]
    assert headers.get("x-team") == "web"

    [logs] = receiver.of("/v1/logs")  # each executed task's output, in its span
    records = [r for rl in logs.resource_logs for sl in rl.scope_logs for r in sl.log_records]
    by_task = {attrs(r.attributes)["vx.task.id"]["stringValue"]: r for r in records}
    assert set(by_task) == {"a#build", "b#build"}
    assert by_task["a#build"].body.string_value.startswith("built ")
    assert by_task["a#build"].span_id == tasks["a#build"].span_id
    assert by_task["a#build"].trace_id == root.trace_id and by_task["a#build"].severity_number == 9

    second = repo.vx("run", "build", env=env)
    assert second.code == 0, second.err
    traces = receiver.of("/v1/traces")
    assert (
        len(traces) == 2
        and traces[1].resource_spans[0].scope_spans[0].spans[0].trace_id != root.trace_id
    )
    later = [s for s in traces[1].resource_spans[0].scope_spans[0].spans if s.name == "vx.task"]
    assert {attrs(s.attributes)["vx.cache.source"]["stringValue"] for s in later} <= {
        "local",
        "up-to-date",
    }

    metrics = receiver.of("/v1/metrics")
    assert len(metrics) == 2 and len(receiver.of("/v1/logs")) == 1  # nothing ran: no logs
    by_name = {m.name: m for m in metrics[1].resource_metrics[0].scope_metrics[0].metrics}
    assert by_name["vx.tasks.total"].sum.data_points[0].as_int == 2
    assert by_name["vx.tasks.total"].sum.aggregation_temporality == 1  # delta: this run only
    assert by_name["vx.tasks.failed"].sum.data_points[0].as_int == 0
    hits = by_name["vx.tasks.cache_hits"].sum.data_points
    assert sum(p.as_int for p in hits) == 2 and all(p.attributes[0].key == "source" for p in hits)
    assert by_name["vx.run.duration_ms"].histogram.data_points[0].count == 1


@pytest.mark.feature("PL-09")
def test_a_failed_task_marks_its_span_and_the_run(repo, receiver):
    """A failed task's span has an error status and the run's result is `failure` (issue:
    OpenTelemetry plugin)."""
    pkgs = {"a": {"tasks": {"build": {"exec": {"command": "exit 3"}}}}}
    files = npm_workspace(pkgs)
    files["vx.workspace.json"] = {
        "plugins": [{"name": "vx.plugins.otel", "options": {"endpoint": receiver.url}}]
    }
    repo.write(files).commit()
    result = repo.vx("run", "build")
    assert result.code == 1
    [trace] = receiver.of("/v1/traces")
    spans = {s.name: s for s in trace.resource_spans[0].scope_spans[0].spans}
    assert spans["vx.task"].status.code == 2 and attrs(spans["vx.task"].attributes)[
        "vx.task.exit_code"
    ] == {"intValue": "3"}
    assert attrs(spans["vx.run"].attributes)["cicd.pipeline.result"] == {"stringValue": "failure"}


@pytest.mark.feature("PL-09")
def test_a_collector_that_is_down_costs_one_warning_and_never_the_build(repo):
    """Nothing listens at the endpoint, or something listens and never answers: the run
    succeeds, with one warning that names the endpoint without its credentials (issue:
    OpenTelemetry plugin, never fails or slows a build)."""
    workspace(repo)
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there now
    refused = repo.vx(
        "run", "build", env={"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://user:s3cret@127.0.0.1:{port}"}
    )
    assert refused.code == 0, refused.err
    warnings = [line for line in refused.err.splitlines() if "OpenTelemetry" in line]
    assert len(warnings) == 1 and "could not be reached" in warnings[0], refused.err
    assert "s3cret" not in refused.err and f"***@127.0.0.1:{port}" in warnings[0]

    silent = socket.socket()  # accepts connections into its backlog, never reads or answers
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    try:
        env = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{silent.getsockname()[1]}",
            "OTEL_EXPORTER_OTLP_TIMEOUT": "300",
        }
        hung = repo.vx("run", "build", env=env)
    finally:
        silent.close()
    assert hung.code == 0, hung.err
    warnings = [line for line in hung.err.splitlines() if "OpenTelemetry" in line]
    assert len(warnings) == 1 and "did not answer in time" in warnings[0], hung.err


@pytest.mark.feature("PL-09")
def test_without_an_endpoint_the_plugin_declines(repo):
    """No endpoint anywhere: the plugin declines, the run is as without it (issue:
    OpenTelemetry plugin)."""
    workspace(repo)
    result = repo.vx("run", "build")
    assert result.code == 0 and "OpenTelemetry" not in result.err and "plugin" not in result.err


@pytest.mark.feature("PL-09")
def test_an_unknown_option_is_refused_with_a_hint(repo):
    """A misspelt option is refused as the plugin loads, exit 2, with the nearest option."""
    workspace(repo, {"name": "vx.plugins.otel", "options": {"endpont": "http://127.0.0.1:1"}})
    result = repo.vx("run", "build", summary=False)
    assert result.code == 2 and "unknown option `endpont`" in result.err
    assert "did you mean `endpoint`?" in result.err
