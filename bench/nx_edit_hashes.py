"""What each matrix edit of bench/nx_side.py moves in Nx's own task hashes (issue #28).

For each edit: Nx's hash details of every task of the task set (bench/nx_hash_details.js: the
hash and every node it folds, from Nx's own hasher, daemon off) before the edit and after it, and
for each task whose hash moved, which nodes moved. Nodes named `npm:…` are external packages; Nx
18.0's hasher folds a different set of them from one call to the next with nothing changed (the
lint tasks of nrwl/nx-recipes' angular-standalone folded 457, then 107, then 12), so a task that
moved only by `npm:` nodes entering or leaving its set, none changing its value, moved by that
noise, not by the edit. Run on a warm, installed copy whose state nothing else changes.

    python bench/nx_edit_hashes.py --ws DIR --targets build,test,lint --files … [--only …]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from nx_side import FILES, matrix_edits, undo  # noqa: E402

DETAILS = BENCH / "nx_hash_details.js"


def details(ws: Path, targets: list[str]) -> dict:
    env = dict(os.environ, NX_DAEMON="false", NX_NO_CLOUD="true")
    out = subprocess.run(
        ["node", str(DETAILS), *targets], cwd=ws, env=env, capture_output=True, text=True
    )
    if out.returncode:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout)


def moved(before: dict, after: dict) -> dict[str, dict]:
    """Each task whose hash moved: the non-npm nodes that moved, and the npm nodes that changed
    value (in both sets) or only entered or left the set."""
    out = {}
    for tid in sorted(set(before) | set(after)):
        a, b = before.get(tid), after.get(tid)
        if a and b and a["hash"] == b["hash"]:
            continue
        if not (a and b):
            out[tid] = {"only_one": True}
            continue
        da, db = a["details"], b["details"]
        na, nb = da.get("nodes", {}), db.get("nodes", {})
        keys = set(na) | set(nb)
        out[tid] = {
            "moved": sorted(
                [s for s in ("command", "implicitDeps", "runtime") if da.get(s) != db.get(s)]
                + [k for k in keys if not k.startswith("npm:") and na.get(k) != nb.get(k)]
            ),
            "npm_changed": sorted(
                k for k in keys if k.startswith("npm:") and k in na and k in nb and na[k] != nb[k]
            ),
            "npm_set": len([k for k in keys if k.startswith("npm:") and (k in na) != (k in nb)]),
        }
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--ws", type=Path, required=True)
    ap.add_argument("--targets", default="build,test,lint")
    ap.add_argument("--files", default="")
    ap.add_argument("--only", default="")
    ap.add_argument("--json", type=Path, help="write every moved node here")
    args = ap.parse_args()
    targets = args.targets.split(",")
    files = dict(FILES, **dict(x.split("=", 1) for x in args.files.split(",") if x))
    only = [o for o in args.only.split(",") if o]
    result = {}
    for label, rel, apply in matrix_edits(args.ws, files):
        if only and not any(label.startswith(o) for o in only):
            continue
        before = details(args.ws, targets)
        apply(args.ws)
        try:
            after = details(args.ws, targets)
        finally:
            undo(args.ws, rel)
        result[label] = moved(before, after)
        by_edit = {t: m for t, m in result[label].items() if m.get("moved") or m.get("npm_changed")}
        noise = sorted(set(result[label]) - set(by_edit))
        print(
            f"{label} ({rel}): moved by the edit {sorted(by_edit)}; by npm-set noise only {noise}"
        )
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
