"""Benchmark scripts (run each as ``python benchmarks/<name>.py``); a package so that tests can import them."""
