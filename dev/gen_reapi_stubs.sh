#!/usr/bin/env bash
# Regenerate the vendored REAPI v2 stubs in src/vx/store/remote/reapi_pb/ with grpcio-tools, from
# the proto descriptors BuildGrid 0.9.1 (PyPI) ships: the REAPI v2 of its day, with the compressor
# fields (`supported_compressors`, `compressor`, `acceptable_compressors`) and `digest_functions`
# that Bazel 4.2.3's copy lacks. Argument: a Python >= 3.13 venv holding buildgrid==0.9.1 (the
# scenarios' own, by default). Messages only: the layer calls the RPCs by path (no generated service
# stubs, no grpcio version gate). Imports are rewritten under vx.store.remote.reapi_pb so no
# top-level `google` or `build` package is added (a regular `google` package would hide
# google.protobuf).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${1:-$HOME/.cache/vx-test/reapi/buildgrid-0.9.1}
OUT=src/vx/store/remote/reapi_pb
[ -x "$VENV/bin/python" ] || { echo "give a venv with buildgrid==0.9.1 (PYTHONPATH=tests/scenarios python3 -m support.reapi_servers --install)" >&2; exit 2; }
SET=$(mktemp) && trap 'rm -f "$SET"' EXIT
"$VENV/bin/python" - "$SET" <<'PY'
import sys
from google.protobuf import descriptor_pb2
from buildgrid._protos.build.bazel.remote.execution.v2 import remote_execution_pb2
from buildgrid._protos.google.bytestream import bytestream_pb2
from buildgrid._protos.google.rpc import status_pb2
out, seen = descriptor_pb2.FileDescriptorSet(), set()
def add(fd):
    if fd.name not in seen:
        seen.add(fd.name)
        for dep in fd.dependencies:
            add(dep)
        proto = descriptor_pb2.FileDescriptorProto()
        fd.CopyToProto(proto)
        out.file.append(proto)
for module in (remote_execution_pb2, bytestream_pb2, status_pb2):
    add(module.DESCRIPTOR)
open(sys.argv[1], "wb").write(out.SerializeToString())
PY
rm -rf "$OUT" && mkdir -p "$OUT"
python3 -m grpc_tools.protoc --descriptor_set_in="$SET" --python_out="$OUT" \
  build/bazel/remote/execution/v2/remote_execution.proto build/bazel/semver/semver.proto \
  google/bytestream/bytestream.proto google/longrunning/operations.proto \
  google/rpc/status.proto google/api/annotations.proto google/api/http.proto 2>/dev/null
find "$OUT" -name '*.py' -exec sed -i -E \
  -e 's/^from (build|google\.(api|rpc|longrunning|bytestream))([. ])/from vx.store.remote.reapi_pb.\1\3/' {} +
find "$OUT" -type d -exec touch {}/__init__.py \;
echo '"""Generated REAPI v2 stubs (dev/gen_reapi_stubs.sh); do not edit."""' > "$OUT/__init__.py"
