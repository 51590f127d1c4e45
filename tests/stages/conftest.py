"""Stage tests run on memory, local disk and a user's binding (``faulty://``); those whose outcome hangs on the store
(``store_changes_the_outcome``) on Azurite and fake-gcs-server too."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.stores import STAGE_STORES, store_destination


@pytest.fixture(params=STAGE_STORES)
def destination(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Overrides the core-store ``destination``: each stage's contract holds on a user's binding too."""
    yield from store_destination(request, tmp_path)
