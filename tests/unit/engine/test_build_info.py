"""Where tsc keeps a build info, as vx works it out to remove one left outside a task's outputs
(vx.engine.tsconfig; the scenarios check the rule against the real tsc)."""

from __future__ import annotations

import json

import pytest

from vx.engine.tsconfig import build_info as _build_info
from vx.engine.tsconfig import configs as _configs


def write(path, data) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return str(path)


@pytest.mark.feature("EX-06")
def test_the_rules_of_tsc_for_a_build_infos_place(tmp_path):
    cases = {
        "named.json": (
            {"tsBuildInfoFile": "cache/x.tsbuildinfo", "incremental": True},
            "cache/x.tsbuildinfo",
        ),
        "out.json": ({"outDir": "dist", "composite": True}, "dist/out.tsbuildinfo"),
        "root.json": ({"outDir": "dist", "rootDir": "src", "composite": True}, "root.tsbuildinfo"),
        "bundle.json": ({"outFile": "dist/all.js", "composite": True}, "dist/all.tsbuildinfo"),
        "beside.json": ({"incremental": True}, "beside.tsbuildinfo"),
    }
    for name, (options, where) in cases.items():
        config = write(tmp_path / name, {"compilerOptions": options})
        assert _build_info(config, build=False) == str(tmp_path / where), name
    plain = write(tmp_path / "plain.json", {"compilerOptions": {"outDir": "dist"}})
    assert _build_info(plain, build=False) is None  # not incremental: no build info
    assert _build_info(plain, build=True) == str(tmp_path / "dist/plain.tsbuildinfo")  # tsc -b


@pytest.mark.feature("EX-06")
def test_extends_and_comments_are_followed_relative_to_the_file_that_sets_a_path(tmp_path):
    write(
        tmp_path / "base/tsconfig.base.json",
        '{ // shared\n "compilerOptions": {"tsBuildInfoFile": "../state/b.tsbuildinfo",},\n}',
    )
    config = write(
        tmp_path / "pkg/tsconfig.json",
        {"extends": "../base/tsconfig.base", "compilerOptions": {"incremental": True}},
    )
    assert _build_info(config, build=False) == str(tmp_path / "state/b.tsbuildinfo")
    assert _build_info(str(tmp_path / "missing.json"), build=True) is None


@pytest.mark.feature("EX-06")
def test_the_configs_a_command_line_names(tmp_path):
    project = str(tmp_path)
    (tmp_path / "sub").mkdir()
    assert _configs(" -b --verbose && node x.js", project) == [
        (f"{project}/tsconfig.json", True, {})
    ]
    assert _configs(" -p tsconfig.build.json; echo", project) == [
        (f"{project}/tsconfig.build.json", False, {})
    ]
    assert _configs(" --build sub other.json", project) == [
        (f"{project}/sub/tsconfig.json", True, {}),
        (f"{project}/other.json", True, {}),
    ]
    assert _configs(" --noEmit", project) == [(f"{project}/tsconfig.json", False, {})]
    flags = " --incremental --tsBuildInfoFile .cache/x.tsbuildinfo --outDir out"
    assert _configs(flags, project) == [
        (
            f"{project}/tsconfig.json",
            False,
            {
                "incremental": True,
                "tsBuildInfoFile": f"{project}/.cache/x.tsbuildinfo",
                "outDir": f"{project}/out",
            },
        )
    ]


@pytest.mark.feature("EX-06")
def test_the_command_lines_options_win_over_the_tsconfigs(tmp_path):
    config = write(tmp_path / "tsconfig.json", {"compilerOptions": {"outDir": "dist"}})
    assert _build_info(config, False) is None
    assert _build_info(config, False, {"incremental": True}) == str(
        tmp_path / "dist/tsconfig.tsbuildinfo"
    )
    cli = {"incremental": True, "outDir": str(tmp_path / "out")}
    assert _build_info(config, False, cli) == str(tmp_path / "out/tsconfig.tsbuildinfo")


@pytest.mark.feature("EX-06")
def test_config_dir_is_the_folder_of_the_config_tsc_compiles(tmp_path):
    """`${configDir}` written in a shared base config means the folder of the config that extends
    it (TypeScript 5.5), not the base's own folder; a name that says tsbuildinfo is a build info."""
    from vx.engine.tsconfig import is_build_info, read_config

    base = {
        "compilerOptions": {
            "incremental": True,
            "tsBuildInfoFile": "${configDir}/.cache/tsbuildinfo.json",
            "outDir": "${configDir}/dist",
        },
        "include": ["${configDir}/src"],
    }
    (tmp_path / "tooling").mkdir()
    (tmp_path / "tooling" / "base.json").write_text(json.dumps(base))
    (tmp_path / "pkg").mkdir()
    config = tmp_path / "pkg" / "tsconfig.json"
    config.write_text(json.dumps({"extends": "../tooling/base.json"}))
    info = _build_info(str(config), build=False)
    assert info == str(tmp_path / "pkg" / ".cache" / "tsbuildinfo.json")
    read = read_config(str(config))
    assert read is not None and read.options["outDir"] == str(tmp_path / "pkg" / "dist")
    assert read.include == (str(tmp_path / "pkg" / "src"),)
    assert is_build_info(".cache/tsbuildinfo.json") and is_build_info("dist/app.tsbuildinfo")
    assert not is_build_info("dist/app.json")
