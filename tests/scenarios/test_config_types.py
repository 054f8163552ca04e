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
