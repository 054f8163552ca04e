"""Validate decoded config data into ProjectConfig / WorkspaceConfig values.

Every object level refuses a key it does not know: a typo in a key field (`ouputs`,
`workspaceFile`) would otherwise load, hash as if never written and serve a stale hit.
Each refusal is a ConfigError naming the file, the field path
(`tasks.build.cache.inputs.files[2]`) and a hint — the nearest spelling, or vx's home
for a key another tool spells differently (section 2).

The two entry points are here; the parts live by what they own: `vx.config.fields` (the field
path, kind checks and key levels every refusal goes through), `vx.config.project` (vx.config.json
and its tasks), `vx.config.exec_sandbox` (exec.sandbox) and `vx.config.workspace_file` (vx.workspace.json).
"""

from vx.config.project import validate_project
from vx.config.workspace_file import validate_workspace

__all__ = ["validate_project", "validate_workspace"]
