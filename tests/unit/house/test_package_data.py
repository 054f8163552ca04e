"""Every file vx reads from its own package at run time (the Node helpers beside the config
modules, the JSON schemas) is one pyproject.toml's package-data ships: an installed vx has it."""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SRC = ROOT / "src"


def test_every_non_python_file_of_the_package_is_shipped():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    shipped = data["tool"]["setuptools"]["package-data"]
    missing = []
    for path in sorted((SRC / "vx").rglob("*")):
        if (
            not path.is_file()
            or path.suffix in (".py", ".pyc", ".pyi")
            or "__pycache__" in path.parts
        ):
            continue
        if path.name == "py.typed":
            continue
        rel = path.relative_to(SRC)
        ok = False
        for package, globs in shipped.items():
            base = Path(*package.split("."))
            if base in rel.parents:
                inner = rel.relative_to(base).as_posix()
                ok = ok or any(fnmatch.fnmatch(inner, g) for g in globs)
        if not ok:
            missing.append(rel.as_posix())
    assert not missing, f"add to pyproject.toml's [tool.setuptools.package-data]: {missing}"
