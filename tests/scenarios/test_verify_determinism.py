"""`vx run --verify=determinism` (LG-03): each cached task runs again from the same inputs and is
compared with its cache entry; an output that differs is named with its first differing line (or
byte), the entry is kept, and the run exits 1."""

import pytest
from support.workspace import npm_workspace


def node(script: str) -> str:
    return "node -e \"const fs=require('fs');fs.mkdirSync('dist',{recursive:true});" + script + '"'


STAMPED = node(
    "fs.writeFileSync('dist/const.js','export const v = 1;\\n');"
    "fs.writeFileSync('dist/stamp.js','// built\\nexport const at = '+Date.now()+';\\n');"
)
STEADY = node("fs.writeFileSync('dist/lib.js','export const lib = 2;\\n');")
# a build number kept beside the package, outside its inputs and outputs: each run's differs
BINARY = node(
    "const n=fs.existsSync('.count')?+fs.readFileSync('.count','utf8')+1:1;"
    "fs.writeFileSync('.count',String(n));"
    "fs.writeFileSync('dist/blob.bin',Buffer.from([0,1,2,n,0]));"
)


def cached(command: str, deps=()) -> dict:
    return {
        "exec": {"command": command},
        "dependsOn": list(deps),
        "cache": {"inputs": {"files": ["src/**"]}, "outputs": {"files": ["dist/**"]}},
    }


def workspace(repo, app: str = STAMPED):
    packages: dict[str, dict] = {
        "lib": {"tasks": {"build": cached(STEADY)}, "files": {"src/a.js": "L;"}},
        "app": {
            "deps": ["lib"],
            "tasks": {"build": cached(app, deps=("^build",))},
            "files": {"src/a.js": "A;"},
        },
    }
    repo.write(npm_workspace(packages)).commit()
    return repo


@pytest.mark.feature("LG-03")
def test_a_timestamp_is_named_with_its_line_and_fails_the_run(repo):
    workspace(repo)
    first = repo.vx("run", "app#build")
    assert first.code == 0, first.err
    kept = (repo.root / "packages/app/dist/stamp.js").read_text()
    res = repo.vx("run", "app#build", "--verify=determinism")
    assert res.code == 1, res.out + res.err
    lines = res.out.splitlines()
    at = lines.index("app#build: 1 output differs on a second run:")
    assert lines[at + 1] == "  packages/app/dist/stamp.js:2"
    assert lines[at + 2].startswith("    first:  export const at = ")
    assert lines[at + 3].startswith("    second: export const at = ")
    assert lines[at + 2] != lines[at + 3].replace("second:", "first: ")
    report = lines[at:]
    assert len(report) == 6, report  # the steady outputs (const.js, lib#build's) match
    assert lines[-1] == (
        "determinism: 1 of 2 tasks wrote different outputs from the same inputs "
        "(the cache keeps the first result)"
    )
    # the entry is kept, and restored over the second result: the next run is a true hit
    assert (repo.root / "packages/app/dist/stamp.js").read_text() == kept
    again = repo.vx("run", "app#build")
    assert again.code == 0 and again.task("app#build")["cache"] in ("local", "up-to-date")
    assert (repo.root / "packages/app/dist/stamp.js").read_text() == kept


@pytest.mark.feature("LG-03")
def test_without_an_entry_it_runs_twice_and_a_deterministic_build_passes(repo):
    workspace(repo, app=node("fs.writeFileSync('dist/out.js','A;\\n');"))
    res = repo.vx("run", "app#build", "--verify=determinism")
    assert res.code == 0, res.out + res.err
    assert (
        res.out.splitlines()[-1] == "determinism: every task wrote the same outputs twice (2 tasks)"
    )
    hit = repo.vx("run", "app#build")  # the first run of each was saved
    assert hit.code == 0 and hit.task("app#build")["cache"] in ("local", "up-to-date")


@pytest.mark.feature("LG-03")
def test_a_binary_output_is_named_with_its_byte_offset(repo):
    workspace(repo, app=BINARY)
    res = repo.vx("run", "app#build", "--verify=determinism")
    assert res.code == 1, res.out + res.err
    assert "  packages/app/dist/blob.bin  byte 3" in res.out.splitlines()


@pytest.mark.feature("LG-03")
def test_the_fingerprint_mode_is_refused_with_a_hint(repo):
    workspace(repo)
    res = repo.vx("run", "app#build", "--verify=fingerprint")
    assert res.code == 2 and "not implemented yet" in res.err and "--verify=determinism" in res.err
