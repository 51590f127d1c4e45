"""Each stages package's docstring indexes every module in it: a newcomer reads the index, not the folder."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

STAGES = Path(__file__).resolve().parents[2] / "stages"
PACKAGES = sorted(path.parent for path in STAGES.rglob("__init__.py"))


def indexed(package: Path) -> set[str]:
    docstring = (package / "__init__.py").read_text(encoding="utf-8").split('"""')[1]
    return set(re.findall(r"^ *``([a-z_]+)/?``", docstring, flags=re.MULTILINE))


@pytest.mark.parametrize("package", PACKAGES, ids=[str(p.relative_to(STAGES.parent)) for p in PACKAGES])
def test_the_index_names_every_module_and_folder(package: Path) -> None:
    present = {path.stem for path in package.glob("*.py") if path.stem != "__init__"}
    present |= {path.name for path in package.iterdir() if (path / "__init__.py").exists()}
    assert indexed(package) == present


def test_the_index_is_read() -> None:
    assert "rename_files" in indexed(STAGES / "manifest")
    assert {"manifest", "base"} <= indexed(STAGES)
