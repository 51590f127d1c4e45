"""Test suites shipped for users of the library: ``store_contract``, the store contract as pytest tests.

Nothing in the library imports this package, so pytest is needed only where these tests run.
"""
