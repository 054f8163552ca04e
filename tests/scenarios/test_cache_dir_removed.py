"""The shared store removed under a running build (`rm -rf ~/.vx`, a bench's or a CI cache's cleanup
beside the run): the downloads and saves after it still land, in a store made again as the run's
open made it (each level 0700), and the next run hits them locally. Before, every download and save
left in the run failed ("cannot write to the cache: No such file or directory"): those tasks ran
again and kept nothing (a 1,000-package restore lost 150 so, docs/benchmarks.md).

The removal is ordered, not timed: an uncached task removes the dir, and the tasks that depend on
it are keyed (and so downloaded) and saved only after it ends (`plan.tasks.late_tasks`)."""

import os
import stat

import pytest
from support.reapi_servers import BuildGrid
from support.remote_servers import CANARY, NxServer, clone, outputs
from support.workspace import build_task, npm_workspace

# Removes the dir named by the marker file at the workspace root, if there is one: only the
# restoring clone has it, so the clone that uploads keeps its cache.
DROP = (
    "node -e \"const fs=require('fs');const m='../../drop-cache';"
    "if(fs.existsSync(m)){const d=fs.readFileSync(m,'utf8').trim();"
    "fs.rmSync(d,{recursive:true,force:true});console.log('dropped '+d)}\""
)


def files(remote: dict) -> dict[str, object]:
    """`wipe#prep` (uncached) before app's and docs' builds; both builds cached."""
    after = build_task(deps=("wipe#prep",))
    ws = npm_workspace(
        {
            "wipe": {"tasks": {"prep": {"exec": {"command": DROP}}}},
            "app": {"tasks": {"build": after}, "files": {"src/p.js": "APP;"}},
            "docs": {"tasks": {"build": after}, "files": {"src/d.js": "DOCS;"}},
        }
    )
    ws["vx.workspace.json"] = {"remoteCache": remote}
    return ws


@pytest.fixture(params=["reapi", "v8", "nx"])
def server(request, tmp_path, team):
    """(remoteCache config, env) of a server: BuildGrid over REAPI, turbo's /v8 one, or the Nx
    self-hosted API (the suite's own; all three land downloads through `store.layered`)."""
    if request.param == "reapi":
        grid = BuildGrid(tmp_path / "bgd", instance="vx-tests")
        yield {"reapi": {"endpoint": grid.endpoint, "instance": grid.instance}}, {"CI": "1"}
        grid.stop()
    elif request.param == "v8":
        turbo = request.getfixturevalue("turbo_server")
        yield {"turbo": {"team": team}}, {**turbo.env(team), "CI": "1"}
    else:
        nx = NxServer({CANARY: "write"})
        env = {
            "NX_SELF_HOSTED_REMOTE_CACHE_SERVER": nx.url,
            "NX_SELF_HOSTED_REMOTE_CACHE_ACCESS_TOKEN": CANARY,
            "CI": "1",
        }
        yield {"nx": {}}, env
        nx.close()


def artifacts(directory) -> set[str]:
    return {p.name for p in directory.glob("*.tar.zst")}


def test_downloads_and_saves_after_the_store_is_removed_land(repo, tmp_path, server):
    """app#build is a remote hit downloaded after `wipe#prep` removed `~/.vx`; docs#build, edited
    in the clone, is a miss saved after it. Both land in the store made again, private level by
    level, and a third run restores both locally."""
    remote, env = server
    repo.write(files(remote)).commit()
    home_a, home_b = tmp_path / "home-a", tmp_path / "home-b"
    for home in (home_a, home_b):
        home.mkdir(mode=0o700)
    shared = {**env, "VX_SHARED_STORE": "1"}
    cold = repo.vx("run", "build", "--all", env={**shared, "HOME": str(home_a)})
    assert cold.code == 0, cold.err
    assert cold.statuses()["app#build"] == ("success", "miss"), cold.err

    b = clone(repo, tmp_path / "b")
    (b.root / "drop-cache").write_text(str(home_b / ".vx"))
    b.write({"packages/docs/src/d.js": "DOCS, EDITED;"})
    warm = b.vx("run", "build", "--all", env={**shared, "HOME": str(home_b)})
    assert warm.code == 0, warm.err
    assert "dropped" in warm.out + warm.err
    assert "cannot write to the cache" not in warm.err, warm.err
    assert "not saved" not in warm.err, warm.err
    assert warm.statuses()["app#build"] == ("success", "remote"), warm.err
    assert warm.statuses()["docs#build"] == ("success", "miss"), warm.err
    (store,) = (home_b / ".vx").glob("*/cache")
    assert len(artifacts(store)) == 2  # app's download and docs' save
    for level in (home_b / ".vx", store.parent, store):
        assert stat.S_IMODE(os.lstat(level).st_mode) == 0o700
    assert outputs(b)["packages/docs/dist/out.js"] == b"DOCS, EDITED;"

    (b.root / "drop-cache").unlink()
    for out in b.root.glob("packages/*/dist/*"):
        out.unlink()
    again = b.vx("run", "build", "--all", env={**shared, "HOME": str(home_b)})
    assert again.code == 0, again.err
    assert again.statuses()["app#build"] == ("success", "local"), again.err
    assert again.statuses()["docs#build"] == ("success", "local"), again.err
    assert outputs(b)["packages/app/dist/out.js"] == b"APP;"
