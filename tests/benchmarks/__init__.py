"""Tests of the benchmark scripts: they must still run, and measure what they say."""
