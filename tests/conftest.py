import sys
from pathlib import Path

# Tests run against the checkout even before `pip install -e .`.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
