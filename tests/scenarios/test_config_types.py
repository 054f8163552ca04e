"""`@vx-build/vx/config`'s TypeScript types (WS-07): made from the shipped JSON Schemas by
dev/config_types (json-schema-to-typescript, pinned) and committed as npm/vx/config.d.ts; the real
tsc checks configs against them as an editor would."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.npm_packages import installed

ROOT = Path(__file__).resolve().parents[2]
GOOD = """import { defineProject } from '@vx-build/vx/config';
export default defineProject({
  tasks: {
    build: {
      exec: { command: 'tsc -b', persistent: {} },
      dependsOn: ['^build'],
      cache: { inputs: { files: ['src/**'] }, outputs: { files: ['dist/**'] } },
    },
  },
});
"""
# A plugin is declared in code as in JSON: by name, with its options. Its hooks are Python
# (docs/plugins.md); a JavaScript hook in a config is refused by vx (a config is JSON data).
GOOD_PLUGINS = """import { defineWorkspace, definePlugin } from '@vx-build/vx/config';
const abi = definePlugin({ name: 'tools.vx_abi', options: { abi: 115 } });
export default defineWorkspace({ plugins: ['vx.plugins.otel', abi, definePlugin('tools.lint')] });
"""
BAD_PLUGINS = {
    # a hook written in JavaScript, as if vx called it
    "hook.ts": "definePlugin({ name: 'tools.vx_abi', key: () => ({ abi: '115' }) });",
    # a misspelt key
    "misspelt.ts": "definePlugin({ name: 'tools.vx_abi', option: { abi: 115 } });",
    # options that are not an object
    "scalar.ts": "definePlugin({ name: 'tools.vx_abi', options: 115 });",
}
BAD = """import { defineProject } from '@vx-build/vx/config';
export default defineProject({
  tasks: { build: { exec: { command: 'tsc' }, cache: { ouputs: { files: ['dist/**'] } } } },
});
"""


@pytest.mark.feature("WS-07")
def test_the_committed_types_are_what_the_schemas_make():
    json2ts = installed("json-schema-to-typescript")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "dev" / "config_types"), str(json2ts), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr


@pytest.mark.feature("WS-07")
def test_tsc_takes_a_good_config_and_names_a_misspelt_key(tmp_path):
    """...and types a plugin declaration: before, `definePlugin` took any object, a JavaScript
    hook vx never calls included."""
    package = tmp_path / "node_modules" / "@vx-build" / "vx"
    package.mkdir(parents=True)
    shutil.copy(ROOT / "npm" / "vx" / "package.json", package / "package.json")
    shutil.copy(ROOT / "npm" / "vx" / "config.d.ts", package / "config.d.ts")
    shutil.copy(ROOT / "src" / "vx" / "config" / "define.mjs", package / "config.mjs")
    options = {
        "strict": True,
        "noEmit": True,
        "module": "nodenext",
        "moduleResolution": "nodenext",
        "target": "es2022",
        "skipLibCheck": False,  # the declarations themselves are checked too
    }
    (tmp_path / "tsconfig.json").write_text(
        json.dumps({"compilerOptions": options, "include": ["*.ts"]})
    )
    (tmp_path / "package.json").write_text('{"type": "module"}')
    (tmp_path / "good.ts").write_text(GOOD)
    (tmp_path / "good_plugins.ts").write_text(GOOD_PLUGINS)
    tsc = installed("typescript") / "bin" / "tsc"
    clean = subprocess.run(
        ["node", str(tsc), "-p", "."], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert clean.returncode == 0, clean.stdout + clean.stderr
    (tmp_path / "bad.ts").write_text(BAD)
    typo = subprocess.run(
        ["node", str(tsc), "-p", "."], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert typo.returncode != 0
    assert "bad.ts" in typo.stdout and "'ouputs' does not exist" in typo.stdout, typo.stdout
    assert "Did you mean to write 'outputs'?" in typo.stdout
    assert "good.ts" not in typo.stdout and "config.d.ts" not in typo.stdout
    (tmp_path / "bad.ts").unlink()
    head = "import { definePlugin } from '@vx-build/vx/config';\n"
    for name, line in BAD_PLUGINS.items():
        (tmp_path / name).write_text(head + f"export default {line}\n")
    plugins = subprocess.run(
        ["node", str(tsc), "-p", "."], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert plugins.returncode != 0
    errors = [line for line in plugins.stdout.splitlines() if ": error TS" in line]
    assert sorted({line.split("(")[0] for line in errors}) == sorted(BAD_PLUGINS), plugins.stdout
    assert "'key' does not exist in type" in plugins.stdout, plugins.stdout
    assert "Did you mean to write 'options'?" in plugins.stdout, plugins.stdout
