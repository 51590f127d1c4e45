"""Stage tests run on every store: memory, local disk, Azurite and fake-gcs-server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.stores import ALL_STORES, store_destination


@pytest.fixture(params=ALL_STORES)
def destination(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Overrides the core-store ``destination``: each stage's contract holds on the cloud stores too."""
    yield from store_destination(request, tmp_path)
