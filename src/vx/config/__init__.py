"""Config files: read vx.config.json / vx.workspace.json and validate them into model values
(`vx.config.loader` is where reading starts)."""
