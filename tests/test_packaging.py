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

import orjson
import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from manifest_committer.documents import DocumentKind

REPO = Path(__file__).resolve().parent.parent
STAGE_MODULES = sorted(str(path.relative_to(REPO / "stages")) for path in (REPO / "stages").rglob("*.py"))
SCHEMA_FILES = sorted(path.name for path in (REPO / "schemas").glob("*.json"))


def build(target: str, source: Path, out: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "hatchling", "build", "-t", target, "-d", str(out)],
        cwd=source,
        check=True,
        capture_output=True,
        timeout=120,
    )
    suffix = ".whl" if target.startswith("wheel") else ".tar.gz"
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
    assert {"base.py", "manifest/commit_job.py", "upload/commit_job.py"} <= set(STAGE_MODULES)
    assert sorted(kind.schema_file for kind in DocumentKind) == SCHEMA_FILES, "one schema per document kind"


def test_wheel_holds_stages_and_schemas_inside_the_package(artifacts: dict[str, Path]) -> None:
    names = set(zipfile.ZipFile(artifacts["wheel"]).namelist())
    for module in STAGE_MODULES:
        assert f"manifest_committer/stages/{module}" in names
    for schema in SCHEMA_FILES:
        assert f"manifest_committer/schemas/{schema}" in names
    top_level = {name.split("/", 1)[0] for name in names}
    assert top_level == {"manifest_committer", "pyspark_manifest_committer.py", "manifest_committer-0.1.0.dist-info"}
    assert not any("__pycache__" in name for name in names)


def requirements(wheel: Path) -> set[str]:
    """The wheel's ``Requires-Dist`` lines, as hatchling wrote them."""
    archive = zipfile.ZipFile(wheel)
    (metadata,) = (name for name in archive.namelist() if name.endswith(".dist-info/METADATA"))
    lines = archive.read(metadata).decode().splitlines()
    return {line.removeprefix("Requires-Dist: ") for line in lines if line.startswith("Requires-Dist: ")}


def test_example_only_dependencies_are_an_extra(artifacts: dict[str, Path]) -> None:
    """The library needs no log handler; the example's one comes with ``[examples]`` (and ``[dev]``)."""
    required = requirements(artifacts["wheel"])
    handler = {r for r in required if r.startswith("concurrent-log-handler")}
    assert handler == {
        "concurrent-log-handler>=0.9.25; extra == 'examples'",
        "concurrent-log-handler>=0.9.25; extra == 'dev'",
    }


def test_pandas_stays_below_3_wherever_it_is_required(artifacts: dict[str, Path]) -> None:
    """PySpark 4.3 warns about pandas 3 at every session; every extra that pulls pandas in keeps it below 3."""
    pandas = {r for r in requirements(artifacts["wheel"]) if r.startswith("pandas")}
    assert pandas == {"pandas<3,>=2.2; extra == 'spark'", "pandas<3,>=2.2; extra == 'dev'"}


WRITER_FRAMEWORKS = ("pyspark", "pyarrow", "polars", "dask", "ray")


def test_every_writer_framework_declares_the_tested_range_alike_in_every_extra(artifacts: dict[str, Path]) -> None:
    """Each framework a writer drives is bounded below (the oldest release ``scripts/run-oldest-tests.sh`` tests)
    and above (the next major release, not yet known to work), the same in every extra, ``dev`` included (no pin
    of its own there: the test command installs the newest release the range admits); ``scripts/frameworks.py
    oldest`` pins exactly the lower bounds."""
    ranges: dict[str, set[str]] = {}
    for line in requirements(artifacts["wheel"]):
        requirement = Requirement(line)
        if requirement.name in WRITER_FRAMEWORKS:
            ranges.setdefault(requirement.name, set()).add(str(requirement.specifier))
    assert sorted(ranges) == sorted(WRITER_FRAMEWORKS)
    lower: dict[str, str] = {}
    for name, specifiers in ranges.items():
        assert len(specifiers) == 1, f"{name}: {specifiers}"
        clauses = {clause.operator: clause.version for clause in SpecifierSet(next(iter(specifiers)))}
        assert sorted(clauses) == ["<", ">="], name
        lower[name] = clauses[">="]
    script = [sys.executable, "scripts/frameworks.py", "oldest"]
    pins = [
        Requirement(pin)
        for pin in subprocess.run(script, cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    ]
    assert {pin.name: str(pin.specifier) for pin in pins} == {name: f"=={version}" for name, version in lower.items()}


def test_editable_wheel_carries_the_spark_discovery_module(tmp_path: Path) -> None:
    """Editable installs map packages through an import hook that ``pkgutil.iter_modules`` (PySpark's data source
    lookup) cannot see, so the ``pyspark_`` module must be a real file in the editable wheel too."""
    wheel = build("wheel:editable", REPO, tmp_path)
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "pyspark_manifest_committer.py" in names
    assert (
        zipfile.ZipFile(wheel).read("pyspark_manifest_committer.py")
        == (REPO / "pyspark_manifest_committer.py").read_bytes()
    )


FRESH_SESSION_WRITE = """
import os, sys
os.environ["PYSPARK_PYTHON"] = sys.executable
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
         .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1").getOrCreate())
spark.sparkContext.setLogLevel("FATAL")
try:
    df = spark.createDataFrame([(1, "a"), (2, "b"), (3, "a")], "id int, v string")
    df.write.format("manifest").option("partitionBy", "v").mode("append").save(sys.argv[1])
    print(sorted(row.id for row in spark.read.parquet(sys.argv[1]).collect()))
finally:
    spark.stop()
"""


@pytest.mark.spark
def test_installed_wheel_gives_a_fresh_spark_session_the_manifest_format(
    artifacts: dict[str, Path], tmp_path: Path
) -> None:
    """No ``register(spark)``: PySpark finds ``pyspark_manifest_committer.DefaultSource`` in the installed wheel."""
    site = tmp_path / "site"
    zipfile.ZipFile(artifacts["wheel"]).extractall(site)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    script = elsewhere / "job.py"
    script.write_text(FRESH_SESSION_WRITE)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(site)
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, str(script), str(out)],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert result.stdout.strip().splitlines()[-1] == "[1, 2, 3]"
    success = orjson.loads((out / "_SUCCESS").read_bytes())
    assert success["success"] is True
    assert success["jobIdSource"] == "spark.sql.sources.writeJobUUID"


def test_sdist_builds_a_wheel_with_the_same_package(artifacts: dict[str, Path], tmp_path: Path) -> None:
    with tarfile.open(artifacts["sdist"]) as archive:
        members = archive.getmembers()
        assert not any(member.issym() and member.name.endswith(("/stages", "/schemas")) for member in members)
        archive.extractall(tmp_path / "src", filter="data")
    (source,) = (tmp_path / "src").iterdir()
    stages = source / "manifest_committer" / "stages"
    assert sorted(str(p.relative_to(stages)) for p in stages.rglob("*.py")) == STAGE_MODULES
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
        "import json, importlib.resources as r, manifest_committer\n"
        "import manifest_committer.stages.manifest.commit_job as cj\n"
        f"assert manifest_committer.__file__.startswith({str(site)!r}), manifest_committer.__file__\n"
        f"assert cj.__file__.startswith({str(site)!r}), cj.__file__\n"
        f"for name in {SCHEMA_FILES!r}:\n"
        "    schema = json.loads((r.files('manifest_committer') / 'schemas' / name).read_text())\n"
        "    assert schema['$schema'].endswith('2020-12/schema')\n"
        "from manifest_committer.documents import DocumentKind, schema_errors\n"
        "errors = schema_errors(DocumentKind.PENDING_UPLOAD_RECORD, {'upload': {'bucket': 1}})\n"
        "assert any(e.startswith('upload.bucket') for e in errors), errors  # a $ref to another shipped schema\n"
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
    result = python("import manifest_committer.stages.manifest.rename_files as m; print(m.RenameFilesStage.name)", REPO)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "job_stage_rename_files"


def test_the_spark_discovery_module_passes_pysparks_own_check() -> None:
    """What ``pyspark/sql/worker/lookup_data_sources.py`` requires: a ``DefaultSource`` that is a ``DataSource``."""
    from pyspark.sql.datasource import DataSource

    import pyspark_manifest_committer

    assert issubclass(pyspark_manifest_committer.DefaultSource, DataSource)
    assert pyspark_manifest_committer.DefaultSource.name() == "manifest"
