"""Keys that look like the committer's but are not: a misspelt or upper-case prefix, a short form. Each is an
error naming it and the key meant, while the keys of everything else in a Spark or Hadoop configuration pass."""

from __future__ import annotations

import pytest

import manifest_committer as mc


@pytest.mark.parametrize(
    ("key", "meant"),
    [
        ("mapreduce.manifest.commiter.io.threads", "mapreduce.manifest.committer.io.threads"),
        ("mapreduce.manifestcommitter.io.threads", None),
        ("mapreduse.manifest.committer.validate.output", "mapreduce.manifest.committer.validate.output"),
        ("spark.hadoop.mapreduce.manifest.commiter.io.threads", "spark.hadoop.mapreduce.manifest.committer.io.threads"),
        ("mapreduce.fileoutputcomitter.marksuccessfuljobs", "mapreduce.fileoutputcommitter.marksuccessfuljobs"),
        ("MAPREDUCE.MANIFEST.COMMITTER.IO.THREADS", "mapreduce.manifest.committer.io.threads"),
        ("Mapreduce.Manifest.Committer.io.threads", "mapreduce.manifest.committer.io.threads"),
        ("mapreduce.manifest.committer.IO.THREADS", "mapreduce.manifest.committer.io.threads"),
        ("io.threads", "mapreduce.manifest.committer.io.threads"),
        ("heartbeat.expiry.seconds", "mapreduce.manifest.committer.heartbeat.expiry.seconds"),
        ("marksuccessfuljobs", "mapreduce.fileoutputcommitter.marksuccessfuljobs"),
    ],
)
def test_a_key_that_looks_like_the_committers_is_an_error_naming_it(key: str, meant: str | None) -> None:
    with pytest.raises(mc.ConfigError) as raised:
        mc.CommitterConfig.from_hadoop_conf({key: "8"})
    message = str(raised.value)
    assert message.startswith(f"{key}: ")
    if meant is not None:
        assert message.endswith(f"did you mean `{meant}`?")


@pytest.mark.parametrize(
    "key",
    [
        "spark.executor.memory",
        "spark.sql.sources.commitProtocolClass",
        "spark.hadoop.mapreduce.outputcommitter.factory.scheme.s3a",
        "mapreduce.outputcommitter.factory.scheme.gs",
        "mapreduce.job.committer.setup.cleanup.needed",
        "mapreduce.output.fileoutputformat.compress",
        "fs.s3a.committer.name",
        "io.file.buffer.size",
    ],
)
def test_the_keys_of_everything_else_pass(key: str) -> None:
    assert mc.CommitterConfig.from_hadoop_conf({key: "x"}) == mc.CommitterConfig()
