"""vx.files.lockfile: each project's share of a lockfile (PL-05, PL-06). The real package managers' files
are in tests/scenarios/test_lockfiles.py; here the shapes they cannot be made to write on demand."""

from __future__ import annotations

import pytest

from vx.errors import ConfigError
from vx.files import lockfile

PROJECTS = {
    "": {"name": "root", "manifest": ""},
    "packages/a": {"name": "a", "manifest": ""},
    "packages/c": {"name": "c", "manifest": ""},
}

MAIN = """lockfileVersion: '9.0'

settings:
  autoInstallPeers: true

importers:

  .:
    devDependencies:
      kind-of:
        specifier: 6.0.3
        version: 6.0.3

  packages/a:
    dependencies:
      is-odd:
        specifier: ^3.0.1
        version: 3.0.1

  packages/c:
    dependencies:
      is-number:
        specifier: ^7.0.0
        version: 7.0.0

packages:

  is-number@6.0.0:
    resolution: {integrity: sha512-six}

  is-number@7.0.0:
    resolution: {integrity: sha512-seven}

  is-odd@3.0.1:
    resolution: {integrity: sha512-odd}

  kind-of@6.0.3:
    resolution: {integrity: sha512-kind}

snapshots:

  is-number@6.0.0: {}

  is-number@7.0.0: {}

  is-odd@3.0.1:
    dependencies:
      is-number: 6.0.0

  kind-of@6.0.3: {}
"""

MANAGER_DOC = """---
lockfileVersion: '9.0'

importers:

  .:
    configDependencies: {}
    packageManagerDependencies:
      pnpm:
        specifier: 9.15.9
        version: 9.15.9

packages:

  pnpm@9.15.9:
    resolution: {integrity: sha512-pnpm}

snapshots:

  pnpm@9.15.9: {}

---
"""


def _digests(text: str) -> dict[str, str]:
    return {
        d: c.digest
        for d, c in lockfile.of_text("/nonexistent", "pnpm-lock.yaml", text, PROJECTS).items()
    }


@pytest.mark.feature("PL-06")
def test_pnpm_v9_closure_reaches_through_snapshots():
    got = lockfile.of_text("/nonexistent", "pnpm-lock.yaml", MAIN, PROJECTS)
    assert set(got["packages/a"].parts) == {
        "importer packages/a",
        "is-odd@3.0.1",
        "is-number@6.0.0",
    }
    assert set(got["packages/c"].parts) == {"importer packages/c", "is-number@7.0.0"}
    bumped = MAIN.replace("sha512-seven", "sha512-seven2")  # same version, another tarball
    before, after = _digests(MAIN), _digests(bumped)
    assert [d for d in before if before[d] != after[d]] == ["packages/c"]


@pytest.mark.feature("PL-06")
def test_pnpm_multi_document_keys_the_main_document_per_project_and_the_rest_whole():
    multi = MANAGER_DOC + MAIN
    assert (
        _digests(multi)["packages/a"] != _digests(MAIN)["packages/a"]
    )  # the manager document is everyone's
    moved = _digests(multi.replace("sha512-seven", "sha512-x"))
    assert [d for d, v in _digests(multi).items() if moved[d] != v] == ["packages/c"]
    other = _digests(multi.replace("sha512-pnpm", "sha512-other"))
    assert all(other[d] != v for d, v in _digests(multi).items())


@pytest.mark.feature("PL-05")
def test_the_memo_answers_without_the_file(tmp_path):
    (tmp_path / "pnpm-lock.yaml").write_text(MAIN)
    memo = tmp_path / "memo"
    first = lockfile.closures(str(tmp_path), "pnpm-lock.yaml", "oid1", PROJECTS, str(memo))
    (tmp_path / "pnpm-lock.yaml").unlink()
    again = lockfile.closures(str(tmp_path), "pnpm-lock.yaml", "oid1", PROJECTS, str(memo))
    assert {d: (c.digest, c.parts) for d, c in again.items()} == {
        d: (c.digest, c.parts) for d, c in first.items()
    }
    with pytest.raises(
        ConfigError
    ):  # another identity is not the memo's: the file is read (and is gone)
        lockfile.closures(str(tmp_path), "pnpm-lock.yaml", "oid2", PROJECTS, str(memo))


def _line_of(text: str, needle: str) -> int:
    return text[: text.index(needle)].count("\n") + 1


@pytest.mark.feature("PL-06")
@pytest.mark.parametrize(
    "bad, at",
    [
        (MAIN.replace("  packages/a:", "\tpackages/a:"), "\tpackages/a:"),
        (
            MAIN.replace("  is-odd@3.0.1:\n    resolution", "  'is-odd@3.0.1:\n    resolution"),
            "  'is-odd",
        ),
        (MAIN.replace("lockfileVersion: '9.0'\n", ""), ""),
    ],
    ids=["tab", "unclosed-quote", "no-version"],
)
def test_an_unreadable_lockfile_names_its_line(bad, at):
    line = _line_of(bad, at)
    with pytest.raises(ConfigError) as err:
        lockfile.of_text("/nonexistent", "pnpm-lock.yaml", bad, PROJECTS)
    assert err.value.file == f"pnpm-lock.yaml:{line}", err.value.render()


@pytest.mark.feature("PL-06")
def test_npm_v1_and_unknown_shapes_key_the_whole_file():
    text = '{"lockfileVersion": 1, "dependencies": {"x": {"version": "1.0.0"}}}'
    got = lockfile.of_text("/nonexistent", "package-lock.json", text, PROJECTS)
    assert len({c.digest for c in got.values()}) == 1
    other = lockfile.of_text(
        "/nonexistent", "package-lock.json", text.replace("1.0.0", "1.0.1"), PROJECTS
    )
    assert all(other[d].digest != got[d].digest for d in got)


@pytest.mark.feature("PL-06")
def test_an_empty_lockfile_resolves_nothing_and_is_no_error():
    got = lockfile.of_text("/nonexistent", "yarn.lock", "\n", PROJECTS)
    assert set(got["packages/a"].parts) == {
        "importer packages/a"
    }  # no entry reached: none to reach


@pytest.mark.feature("PL-06")
def test_multi_line_values_as_pnpm_writes_them():
    """floating-ui's pnpm-lock.yaml: `deprecated: |-` with paragraphs and a blank line, and a long
    plain scalar folded over two lines; every run of a repository with such an entry was refused."""
    text = MAIN.replace(
        "packages:\n",
        """packages:

  q@1.5.1:
    resolution: {integrity: sha512-q}
    deprecated: |-
      You or someone you depend on is using Q: they can almost certainly migrate

      (For a CapTP with native promises, see @endo/eventual-send)

  old@1.0.0:
    resolution: {integrity: sha512-old,
      tarball: https://example.invalid/old.tgz}
    deprecated: This package is no longer supported. Please use
      something-else instead.
""",
        1,
    )
    docs = lockfile.yaml_docs("pnpm-lock.yaml", text)
    assert docs[0]["packages"]["q@1.5.1"]["deprecated"].startswith("|-\nYou or someone")
    assert "(For a CapTP" in docs[0]["packages"]["q@1.5.1"]["deprecated"]
    assert docs[0]["packages"]["old@1.0.0"]["deprecated"].endswith("something-else instead.")
    assert "tarball" in docs[0]["packages"]["old@1.0.0"]["resolution"]
    assert set(lockfile.of_text("/nonexistent", "pnpm-lock.yaml", text, PROJECTS)) == {
        "",
        "packages/a",
        "packages/c",
    }


@pytest.mark.feature("PL-06")
def test_a_blank_line_inside_a_block_scalar_is_kept_and_none_outside():
    """Two lockfiles that differ only by a paragraph break inside a value read differently; the
    blank lines pnpm writes between entries stay out of the values around them."""
    text = MAIN.replace(
        "packages:\n",
        "packages:\n\n  q@1.5.1:\n    resolution: {integrity: sha512-q}\n    deprecated: |-\n"
        "      first\n\n      second\n\n  r@1.0.0:\n    resolution: {integrity: sha512-r}\n\n",
        1,
    )
    packages = lockfile.yaml_docs("pnpm-lock.yaml", text)[0]["packages"]
    assert packages["q@1.5.1"]["deprecated"] == "|-\nfirst\n\nsecond"
    assert packages["r@1.0.0"]["resolution"] == "{integrity: sha512-r}"


@pytest.mark.feature("PL-06")
@pytest.mark.parametrize("name", ["pnpm-lock.yaml", "package-lock.json"])
def test_a_lockfile_saved_with_a_bom_reads_as_without(name):
    npm = '{"lockfileVersion": 3, "packages": {"": {"name": "r"}, "packages/a": {"name": "a"}}}'
    text = MAIN if name == "pnpm-lock.yaml" else npm
    plain = lockfile.of_text("/nonexistent", name, text, PROJECTS)
    bom = lockfile.of_text("/nonexistent", name, "\ufeff" + text, PROJECTS)  # refused before
    assert {d: c.digest for d, c in bom.items()} == {d: c.digest for d, c in plain.items()}
