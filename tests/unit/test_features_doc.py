"""Feature IDs live in test markers and docs/features.md, not in test names (house review)."""

import ast
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
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
