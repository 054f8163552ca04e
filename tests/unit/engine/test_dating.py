"""The date a kept build info may be given (vx.engine.dating): the rules on a file's change, with
stamps standing for "unchanged" and a file replaced (a new inode) for "changed", so no test waits
for the clock to tick. The scenarios hold the rules against the real tsc."""

from __future__ import annotations

import json
import os

import pytest

from vx.engine.dating import Dating
from vx.engine.tsconfig import read_config
from vx.store.local import KeptSince

T = 1_700_000_000_000_000_000  # the date: a whole millisecond
MS = 1_000_000


@pytest.fixture
def ws(tmp_path):
    root = tmp_path / "ws"
    for rel, text in {
        "package.json": "{}",
        "pnpm-lock.yaml": "lockfileVersion: 9\n",
        "p/tsconfig.json": json.dumps({"include": ["src"]}),
        "p/src/a.ts": "export const a = 1;\n",
        "node_modules/dep/index.d.ts": "export declare const d: 1;\n",
        "node_modules/dep/package.json": "{}",
    }.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def every_stamp(root) -> dict[str, tuple[int, int]]:
    """Each path under `root` (and itself and above) as it is: unchanged, whatever its ctime."""
    out = {}
    for folder, dirs, files in os.walk(root):
        for name in [*dirs, *files, ""]:
            path = os.path.normpath(os.path.join(folder, name))
            st = os.lstat(path)
            out[path] = (st.st_ino, st.st_ctime_ns)
    above = str(root)
    while above != os.path.dirname(above):
        above = os.path.dirname(above)
        st = os.lstat(above)
        out[above] = (st.st_ino, st.st_ctime_ns)
        for extra in ("node_modules", "node_modules/@types"):
            if os.path.lexists(os.path.join(above, extra)):
                st = os.lstat(os.path.join(above, extra))
                out[os.path.join(above, extra)] = (st.st_ino, st.st_ctime_ns)
    return out


def replace(path, text: str, mtime_ns: int | None = None) -> None:
    """A new file in the old one's place (a new inode: changed, whatever the clock's tick)."""
    temp = f"{path}.new"
    with open(temp, "w") as f:
        f.write(text)
    os.replace(temp, path)
    if mtime_ns is not None:
        os.utime(path, ns=(mtime_ns, mtime_ns))


def date(root, stamps) -> int | None:
    files = [str(root / "p/src/a.ts"), str(root / "node_modules/dep/index.d.ts")]
    roots = [files[0]]
    config = read_config(str(root / "p/tsconfig.json"))
    return Dating(str(root), KeptSince(0, T + 123, stamps), stamps).time_for(files, roots, config)


@pytest.mark.feature("EX-06")
def test_nothing_changed_the_date_is_the_notes_to_the_millisecond(ws):
    assert date(ws, every_stamp(ws)) == T


@pytest.mark.feature("EX-06")
def test_a_root_changed_is_trusted_only_when_tsc_sees_it_newer(ws):
    stamps = every_stamp(ws)
    replace(ws / "p/src/a.ts", "export const a = 2;\n", T + MS)  # newer by a whole millisecond
    assert date(ws, stamps) == T
    replace(ws / "p/src/a.ts", "export const a = 3;\n", T + MS - 1)  # tsc reads it as T
    assert date(ws, stamps) is None
    replace(ws / "p/src/a.ts", "export const a = 4;\n", T - 3_600 * 10**9)  # cp -p, tar
    assert date(ws, stamps) is None


@pytest.mark.feature("EX-06")
def test_any_other_file_changed_is_the_epoch_unless_vx_wrote_it(ws):
    stamps = every_stamp(ws)
    dep = ws / "node_modules/dep/index.d.ts"
    replace(dep, "export declare const d: 2;\n", T + 10**12)  # tsc -b never compares it
    assert date(ws, stamps) is None
    st = os.lstat(dep)
    assert date(ws, {**stamps, str(dep): (st.st_ino, st.st_ctime_ns)}) == T  # an output of vx's


@pytest.mark.feature("EX-06")
@pytest.mark.parametrize("what", ["pnpm-lock.yaml", "node_modules/dep/package.json"])
def test_an_install_or_a_package_json_changed_is_the_epoch(ws, what):
    stamps = every_stamp(ws)
    replace(ws / what, "{}\n")
    assert date(ws, stamps) is None


@pytest.mark.feature("EX-06")
def test_a_config_vx_cannot_read_in_full_is_the_epoch(ws):
    (ws / "p/tsconfig.json").write_text(json.dumps({"extends": "missing-package/base.json"}))
    stamps = every_stamp(ws)
    assert date(ws, stamps) is None
