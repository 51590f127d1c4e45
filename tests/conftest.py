"""Fixtures live in tests/fixtures/; this file only registers them."""

pytest_plugins = ["tests.fixtures.hadoop", "tests.fixtures.stores"]
