"""Feature IDs live in test markers and docs/features.md, not in test names (house review)."""

import ast
import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location("feature_markers", ROOT / "dev/feature_markers.py")
assert _spec is not None and _spec.loader is not None
feature_markers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(feature_markers)


def test_no_test_name_spells_a_feature_id():
    spelled = []
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        for node, _ in feature_markers.test_defs(ast.parse(path.read_text())):
            if feature_markers.split_name(node.name)[1]:
                spelled.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    assert not spelled, (
        "feature IDs go in @pytest.mark.feature(...), not in the name; "
        "`python3 dev/feature_markers.py` converts these:\n" + "\n".join(spelled)
    )


def test_no_test_name_is_a_number_from_a_list():
    """A name says what the test checks; `test_item7_...` pointed at an audit list that is not in
    the repository, as feature IDs in names did."""
    numbered = []
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        for node, _ in feature_markers.test_defs(ast.parse(path.read_text())):
            if re.match(r"test_items?\d", node.name):
                numbered.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    assert not numbered, "name these tests after what they check:\n" + "\n".join(numbered)


def rows() -> dict[str, tuple[str, list[str]]]:
    found: dict[str, tuple[str, list[str]]] = {}
    for line in (ROOT / "docs/features.md").read_text().splitlines():
        m = feature_markers.ROW.match(line)
        if m:
            assert m["id"] not in found, f"{m['id']} has two rows in docs/features.md"
            found[m["id"]] = (m["what"], re.findall(r"`([^`]+)`", m["tests"]))
    return found


def test_every_feature_row_names_the_tests_marked_with_it():
    held = feature_markers.markers()
    problems = []
    for ident, (what, files) in rows().items():
        if what.strip() in ("", "?"):
            problems.append(f"{ident}: no description")
        if not files:
            problems.append(f"{ident}: no test is marked with it")
        for f in files:
            if not (ROOT / "tests" / f).is_file():
                problems.append(f"{ident}: tests/{f} does not exist")
        if sorted(files) != held.get(ident, []):
            problems.append(f"{ident}: the row says {files}, the markers {held.get(ident, [])}")
    assert not problems, (
        "`python3 dev/feature_markers.py` rewrites the Tests column:\n" + "\n".join(problems)
    )


def test_every_id_a_test_is_marked_with_has_a_row():
    missing = sorted(set(feature_markers.markers()) - set(rows()), key=feature_markers._order)
    assert not missing, (
        "marked in tests but not in docs/features.md (`python3 dev/feature_markers.py` adds "
        f"a row to describe): {missing}"
    )


def test_a_marker_names_a_feature_id():
    bad = [i for i in feature_markers.markers() if not re.fullmatch(r"[A-Z]+-\d{2,}", i)]
    bad += [
        i
        for i in feature_markers.markers()
        if i.split("-")[0].lower() not in feature_markers.FAMILIES
    ]
    assert not bad, f"not a feature ID: {bad}"
