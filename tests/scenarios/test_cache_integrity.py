"""The cache is never a wrong hit: damaged artifacts, inputs edited mid-task, failures (LC-11, LC-12, KEY-21)."""

import pytest
from support.workspace import npm_workspace, one_build


def one_package(repo, command=None):
    repo.write(one_build(command)).commit()


def artifacts(repo):
    return sorted((repo.root / ".vx" / "cache").glob("*.tar.zst"))


@pytest.mark.feature("LC-12")
def test_corrupted_artifact_is_a_miss_with_one_warning(repo):
    one_package(repo)
    assert repo.vx("run", "build", "--all").code == 0
    [art] = artifacts(repo)
    data = bytearray(art.read_bytes())
    data[len(data) // 2] ^= 0xFF
    art.write_bytes(bytes(data))
    (repo.root / "packages/app/dist/out.js").unlink()
    res = repo.vx("run", "build", "--all")
    assert res.code == 0, res.err
    assert res.task("app#build")["cache"] == "miss"
    warnings = [line for line in res.err.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "app#build" in warnings[0] and "damaged" in warnings[0]
    assert (repo.root / "packages/app/dist/out.js").read_text() == "A;"
    assert repo.vx("run", "build", "--all").task("app#build")["cache"] == "up-to-date"


@pytest.mark.feature("LC-12")
def test_truncated_artifact_is_a_miss(repo):
    one_package(repo)
    repo.vx("run", "build", "--all")
    [art] = artifacts(repo)
    art.write_bytes(art.read_bytes()[:20])
    (repo.root / "packages/app/dist/out.js").unlink()
    res = repo.vx("run", "build", "--all")
    assert res.code == 0 and res.task("app#build")["cache"] == "miss"


@pytest.mark.feature("KEY-21")
def test_input_edited_while_the_task_runs_is_not_saved(repo):
    cmd = (
        "node -e \"const fs=require('fs');fs.appendFileSync('src/a.js','//edited');"
        "fs.mkdirSync('dist',{recursive:true});fs.writeFileSync('dist/out.js','x')\""
    )
    one_package(repo, command=cmd)
    res = repo.vx("run", "build", "--all")
    assert res.code == 0
    assert "not saved" in res.err and "src/a.js" in res.err
    assert artifacts(repo) == []


@pytest.mark.feature("LC-11")
def test_only_exit_zero_is_cached(repo):
    one_package(repo, command="echo nope; exit 3")
    res = repo.vx("run", "build", "--all")
    assert res.code == 1
    assert res.task("app#build")["status"] == "failed" and res.task("app#build")["exitCode"] == 3
    assert artifacts(repo) == []
    assert repo.vx("run", "build", "--all").task("app#build")["cache"] == "miss"


@pytest.mark.feature("LC-10")
def test_log_is_replayed_on_a_hit(repo):
    one_package(
        repo,
        command="echo hello-from-build; echo to-stderr >&2; mkdir -p dist; echo x > dist/out.js",
    )
    first = repo.vx("run", "build", cwd="packages/app")
    assert "hello-from-build" in first.out
    second = repo.vx("run", "build", cwd="packages/app")
    assert second.task("app#build")["cache"] == "up-to-date"
    assert "hello-from-build" in second.out


@pytest.mark.feature("LC-15")
def test_force_runs_and_saves_no_cache_neither_reads_nor_writes(repo):
    one_package(repo)
    repo.vx("run", "build", "--all")
    forced = repo.vx("run", "build", "--all", "--force")
    assert forced.task("app#build")["cache"] == "miss"
    for art in artifacts(repo):
        art.unlink()
    nocache = repo.vx("run", "build", "--all", "--no-cache")
    assert nocache.task("app#build")["cache"] in ("miss", "no-cache") and nocache.code == 0
    assert artifacts(repo) == []


@pytest.mark.feature("LC-03")
def test_cache_dir_flag_holds_the_cache(repo, tmp_path):
    one_package(repo)
    elsewhere = tmp_path / "cachehere"
    res = repo.vx("run", "build", "--all", "--cache-dir", str(elsewhere))
    assert res.code == 0
    assert list(elsewhere.glob("*.tar.zst"))
    assert (elsewhere / ".gitignore").read_text().strip() == "*"


@pytest.mark.feature("KEY-23")
def test_globs_that_match_nothing_are_named(repo):
    task = {
        "exec": {"command": "true"},
        "cache": {"inputs": {"files": ["src/**", "nope/**"]}, "outputs": {"files": ["out/**"]}},
    }
    repo.write(
        npm_workspace({"app": {"tasks": {"build": task}, "files": {"src/a.js": "A;"}}})
    ).commit()
    res = repo.vx("run", "build", "--all")
    assert res.code == 0
    assert "cache.inputs matched no files (nope/**)" in res.err
    assert "cache.outputs matched no files (out/**)" in res.err


@pytest.mark.feature("LC-17")
def test_unusable_cache_dir_fails_before_any_task(repo, tmp_path):
    one_package(repo, command="touch ../../ran; mkdir -p dist; echo x > dist/out.js")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    res = repo.vx("run", "build", "--all", "--cache-dir", str(blocker), summary=False)
    assert res.code == 2
    assert str(blocker) in res.err and "Traceback" not in res.err
    assert not (repo.root / "ran").exists()
