#!/usr/bin/env bash
# Regenerate the vendored REAPI v2 stubs in src/vx/store/remote/reapi_pb/ from the .proto files
# Debian's bazel-bootstrap-source ships (REAPI v2 as of Bazel 4.2.3), with grpcio-tools. Messages
# only: the layer calls the RPCs by path (no generated service stubs, no grpcio version gate).
# Imports are rewritten under vx.store.remote.reapi_pb so no top-level `google` or `build` package
# is added (a regular `google` package would hide google.protobuf).
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=/usr/src/bazel-bootstrap/third_party
OUT=src/vx/store/remote/reapi_pb
[ -d "$SRC/remoteapis" ] || { echo "apt-get install bazel-bootstrap-source first" >&2; exit 2; }
rm -rf "$OUT" && mkdir -p "$OUT"
python3 -m grpc_tools.protoc -I "$SRC/remoteapis" -I "$SRC/googleapis" \
  --python_out="$OUT" \
  build/bazel/remote/execution/v2/remote_execution.proto build/bazel/semver/semver.proto \
  google/bytestream/bytestream.proto google/longrunning/operations.proto \
  google/rpc/status.proto google/api/annotations.proto google/api/http.proto
find "$OUT" -name '*.py' -exec sed -i -E \
  -e 's/^from (build|google\.(api|rpc|longrunning|bytestream))([. ])/from vx.store.remote.reapi_pb.\1\3/' {} +
find "$OUT" -type d -exec touch {}/__init__.py \;
echo '"""Generated REAPI v2 stubs (dev/gen_reapi_stubs.sh); do not edit."""' > "$OUT/__init__.py"
