"""stages/ and schemas/ install as manifest_committer.stages and package data; a bare ``import stages`` fails.

The wheel and sdist are built with hatchling's own command (no network, no build isolation), then the wheel is
unpacked into a directory that plays the part of site-packages for a child interpreter.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
STAGE_MODULES = sorted(path.name for path in (REPO / "stages").glob("*.py"))
SCHEMA_FILES = sorted(path.name for path in (REPO / "schemas").glob("*.json"))


def build(target: str, source: Path, out: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "hatchling", "build", "-t", target, "-d", str(out)],
        cwd=source,
        check=True,
        capture_output=True,
        timeout=120,
    )
    suffix = ".whl" if target == "wheel" else ".tar.gz"
    (artifact,) = out.glob(f"*{suffix}")
    return artifact


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("dist")
    return {"wheel": build("wheel", REPO, out), "sdist": build("sdist", REPO, out)}


def python(code: str, cwd: Path, pythonpath: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a child interpreter, optionally with ``pythonpath`` ahead of site-packages."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_the_source_tree_has_the_layout_under_test() -> None:
    assert (REPO / "manifest_committer" / "stages").is_symlink()
    assert (REPO / "manifest_committer" / "schemas").is_symlink()
    assert "commit_job.py" in STAGE_MODULES
    assert SCHEMA_FILES == ["success-data.schema.json", "task-manifest.schema.json"]


def test_wheel_holds_stages_and_schemas_inside_the_package(artifacts: dict[str, Path]) -> None:
    names = set(zipfile.ZipFile(artifacts["wheel"]).namelist())
    for module in STAGE_MODULES:
        assert f"manifest_committer/stages/{module}" in names
    for schema in SCHEMA_FILES:
        assert f"manifest_committer/schemas/{schema}" in names
    top_level = {name.split("/", 1)[0] for name in names}
    assert top_level == {"manifest_committer", "manifest_committer-0.1.0.dist-info"}
    assert not any("__pycache__" in name for name in names)


def test_sdist_builds_a_wheel_with_the_same_package(artifacts: dict[str, Path], tmp_path: Path) -> None:
    with tarfile.open(artifacts["sdist"]) as archive:
        members = archive.getmembers()
        assert not any(member.issym() and member.name.endswith(("/stages", "/schemas")) for member in members)
        archive.extractall(tmp_path / "src", filter="data")
    (source,) = (tmp_path / "src").iterdir()
    assert sorted(p.name for p in (source / "manifest_committer" / "stages").glob("*.py")) == STAGE_MODULES
    wheel = build("wheel", source, tmp_path / "dist")
    from_sdist = {n for n in zipfile.ZipFile(wheel).namelist() if not n.endswith("RECORD")}
    from_repo = {n for n in zipfile.ZipFile(artifacts["wheel"]).namelist() if not n.endswith("RECORD")}
    assert from_sdist == from_repo


def test_installed_wheel_imports_stages_and_finds_schemas(artifacts: dict[str, Path], tmp_path: Path) -> None:
    site = tmp_path / "site"
    zipfile.ZipFile(artifacts["wheel"]).extractall(site)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    code = (
        "import json, importlib.resources as r, manifest_committer, manifest_committer.stages.commit_job as cj\n"
        f"assert manifest_committer.__file__.startswith({str(site)!r}), manifest_committer.__file__\n"
        f"assert cj.__file__.startswith({str(site)!r}), cj.__file__\n"
        "for name in ('task-manifest.schema.json', 'success-data.schema.json'):\n"
        "    schema = json.loads((r.files('manifest_committer') / 'schemas' / name).read_text())\n"
        "    assert schema['$schema'].endswith('2020-12/schema')\n"
        "try:\n"
        "    import stages\n"
        "except ImportError:\n"
        "    print('no top-level stages')\n"
    )
    result = python(code, elsewhere, pythonpath=site)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "no top-level stages"


def test_editable_install_finds_schemas_from_an_unrelated_directory(tmp_path: Path) -> None:
    code = (
        "import importlib.resources as r, manifest_committer\n"
        "print(manifest_committer.__file__)\n"
        "print((r.files('manifest_committer') / 'schemas' / 'task-manifest.schema.json').is_file())\n"
    )
    result = python(code, tmp_path)
    assert result.returncode == 0, result.stderr
    package_file, found = result.stdout.split()
    assert Path(package_file).resolve() == (REPO / "manifest_committer" / "__init__.py").resolve()
    assert found == "True"


def test_bare_import_of_stages_fails_from_the_repo_root() -> None:
    """From the root, ``stages/`` is on sys.path, so only the guard in its ``__init__`` stops the import."""
    result = python("import stages", REPO)
    assert result.returncode != 0
    assert "ImportError" in result.stderr
    assert "manifest_committer.stages" in result.stderr


def test_bare_import_of_stages_fails_from_an_unrelated_directory(tmp_path: Path) -> None:
    result = python("import stages", tmp_path)
    assert result.returncode != 0
    assert "ModuleNotFoundError: No module named 'stages'" in result.stderr


def test_bare_import_of_schemas_fails_from_an_unrelated_directory(tmp_path: Path) -> None:
    result = python("import schemas", tmp_path)
    assert result.returncode != 0
    assert "ModuleNotFoundError" in result.stderr


def test_package_stages_import_from_the_repo_root() -> None:
    result = python("import manifest_committer.stages.rename_files as m; print(m.RenameFilesStage.name)", REPO)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "job_stage_rename_files"
