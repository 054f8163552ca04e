"""Config files: read vx.config.json / vx.workspace.json and validate them into model values."""

from vx.config.loader import load_all, load_project, load_workspace

__all__ = ["load_all", "load_project", "load_workspace"]
