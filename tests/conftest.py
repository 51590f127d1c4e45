"""Fixtures live in tests/fixtures/; this file only registers them."""

pytest_plugins = [
    "tests.fixtures.documents",
    "tests.fixtures.emulators",
    "tests.fixtures.faulty_filesystem",
    "tests.fixtures.frameworks",
    "tests.fixtures.hadoop",
    "tests.fixtures.killing.states",
    "tests.fixtures.spark",
    "tests.fixtures.spark_cluster",
    "tests.fixtures.stores",
    "tests.fixtures.transactional_jobs",
]
