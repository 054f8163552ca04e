"""The shared store's id (LC-02): one spelling per repository, whatever the remote's form."""

from __future__ import annotations

from pathlib import Path

import pytest

from vx.store.shared import normalise_remote, preferred_remote, store_id

TOP = Path("/work/repo")


@pytest.mark.feature("LC-02")
@pytest.mark.parametrize(
    "url",
    [
        "git@github.com:acme/shop.git",
        "git@github.com:Acme/Shop",
        "https://github.com/acme/shop",
        "https://github.com/acme/shop.git/",
        "https://user:secret@github.com/Acme/shop.git",
        "ssh://git@github.com:22/acme/shop.git",
        "ssh://git@github.com/acme/shop",
        "git://github.com/acme/shop.git",
        "github.com:acme/shop.git",
    ],
)
def test_every_spelling_of_one_remote_is_one_repository(url):
    assert normalise_remote(url, TOP) == "github.com/acme/shop"


@pytest.mark.feature("LC-02")
def test_other_repositories_and_hosts_differ():
    names = {
        normalise_remote(u, TOP)
        for u in (
            "git@github.com:acme/shop.git",
            "git@github.com:acme/shop-web.git",
            "git@gitlab.com:acme/shop.git",
            "git@github.com:other/shop.git",
        )
    }
    assert len(names) == 4


@pytest.mark.feature("LC-02")
def test_a_local_remote_is_its_real_path(tmp_path):
    origin = tmp_path / "Origin.git"
    origin.mkdir()
    (tmp_path / "link").symlink_to(origin)
    want = f"file:{origin.as_posix()[: -len('.git')]}"
    assert normalise_remote(str(origin), TOP) == want
    assert normalise_remote(f"file://{tmp_path}/link/", TOP) == want
    assert normalise_remote("../Origin.git", tmp_path / "clone") == want


@pytest.mark.feature("LC-02")
def test_origin_then_upstream_then_base_then_the_first():
    assert preferred_remote([("fork", "f"), ("upstream", "u"), ("origin", "o")]) == "o"
    assert preferred_remote([("fork", "f"), ("base", "b"), ("upstream", "u")]) == "u"
    assert preferred_remote([("fork", "f"), ("base", "b")]) == "b"
    assert preferred_remote([("fork", "f"), ("mine", "m")]) == "f"
    assert preferred_remote([("origin", "  ")]) is None


@pytest.mark.feature("LC-02")
def test_the_id_is_16_hex_and_folds_the_workspace_path():
    a, b = store_id("github.com/acme/shop", ""), store_id("github.com/acme/shop", "apps/web")
    assert len(a) == 16 and int(a, 16) >= 0 and a != b
    assert store_id("github.com/acme/shop", "") == a
