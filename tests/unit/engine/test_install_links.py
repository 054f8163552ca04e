"""What an action's input root holds of pnpm's store with `workerInstall` (engine/remote.py
`install_links`): one link to the workers' `.pnpm` while no store package resolves a workspace
package; otherwise such a package and every store package depending on it shipped as here,
`.pnpm/node_modules`'s links shipped, and each other entry one link."""

from pathlib import Path

from vx.engine.remote import install_links


def package(store: Path, entry: str, name: str, deps: dict[str, str] | None = None) -> None:
    """`.pnpm/<entry>/node_modules/<name>` with an index.js, and a link per dependency."""
    pkg = store / entry / "node_modules" / name
    pkg.mkdir(parents=True)
    (pkg / "index.js").write_text(f"// {name}\n")
    for dep, target in (deps or {}).items():
        link = store / entry / "node_modules" / dep
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(target)


def layout(root: Path, *, peer: bool) -> None:
    """A store of `a` (no deps), `@s/b` (depends on a), `c` (depends on @s/b) and `d` (alone);
    with `peer`, @s/b's peer `ws` is the workspace's packages/ws."""
    store = root / "node_modules/.pnpm"
    package(store, "a@1.0.0", "a")
    deps = {"a": "../../a@1.0.0/node_modules/a"}
    if peer:
        deps["ws"] = "../../../../packages/ws"
    package(store, "@s+b@1.0.0", "@s/b", deps)
    package(store, "c@1.0.0", "c", {"@s/b": "../../../@s+b@1.0.0/node_modules/@s/b"})
    package(store, "d@1.0.0", "d")
    (store / "lock.yaml").write_text("lockfileVersion: '9.0'\n")
    hidden = store / "node_modules"
    hidden.mkdir()
    (hidden / "a").symlink_to("../a@1.0.0/node_modules/a")
    (hidden / "ws").symlink_to("../../../packages/ws")
    (root / "packages/ws").mkdir(parents=True)
    (root / "node_modules/c").symlink_to(".pnpm/c@1.0.0/node_modules/c")


def test_a_store_that_resolves_no_workspace_package_is_one_link(tmp_path):
    layout(tmp_path, peer=False)
    paths, listing = install_links(str(tmp_path), {}, "/opt/ws")
    assert listing.links == (("node_modules/.pnpm", "/opt/ws/node_modules/.pnpm"),)
    assert paths == ["node_modules/c"]


def test_a_package_whose_peer_is_a_workspace_package_is_shipped_with_its_dependants(tmp_path):
    layout(tmp_path, peer=True)
    paths, listing = install_links(str(tmp_path), {}, "/opt/ws")
    pnpm = "node_modules/.pnpm"
    # @s/b links to packages/ws, c depends on @s/b: both shipped as here, their files hashed
    assert sorted(paths) == [
        f"{pnpm}/@s+b@1.0.0/node_modules/@s/b/index.js",
        f"{pnpm}/c@1.0.0/node_modules/c/index.js",
        "node_modules/c",
    ]
    assert dict(listing.links) == {
        # their links and the hidden hoisting's as they are here (read once a run)
        f"{pnpm}/@s+b@1.0.0/node_modules/a": "../../a@1.0.0/node_modules/a",
        f"{pnpm}/@s+b@1.0.0/node_modules/ws": "../../../../packages/ws",
        f"{pnpm}/c@1.0.0/node_modules/@s/b": "../../../@s+b@1.0.0/node_modules/@s/b",
        f"{pnpm}/node_modules/a": "../a@1.0.0/node_modules/a",
        f"{pnpm}/node_modules/ws": "../../../packages/ws",
        # the rest of the store one link an entry
        f"{pnpm}/a@1.0.0": f"/opt/ws/{pnpm}/a@1.0.0",
        f"{pnpm}/d@1.0.0": f"/opt/ws/{pnpm}/d@1.0.0",
        f"{pnpm}/lock.yaml": f"/opt/ws/{pnpm}/lock.yaml",
    }


def test_pnpm_hoisted_linker_is_a_hoisted_tree(tmp_path):
    """pnpm's `node-linker=hoisted` leaves only lock.yaml in `.pnpm`: the packages are the
    root node_modules' directories, each one link."""
    modules = tmp_path / "node_modules"
    (modules / ".pnpm").mkdir(parents=True)
    (modules / ".pnpm/lock.yaml").write_text("lockfileVersion: '9.0'\n")
    (modules / "kind-of").mkdir()
    (modules / "kind-of/index.js").write_text("\n")
    (tmp_path / "packages/lib").mkdir(parents=True)
    (modules / "lib").symlink_to("../packages/lib")
    paths, listing = install_links(str(tmp_path), {}, "/opt/ws")
    assert paths == ["node_modules/lib"]
    assert dict(listing.links) == {
        "node_modules/.pnpm": "/opt/ws/node_modules/.pnpm",
        "node_modules/kind-of": "/opt/ws/node_modules/kind-of",
    }
