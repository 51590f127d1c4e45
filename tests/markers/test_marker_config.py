"""The marker keys of CommitterConfig (docs/markers.md), strictly validated like every other key."""

from __future__ import annotations

import pickle

import pytest

from manifest_committer import CommitterConfig, ConfigError
from manifest_committer.config import HADOOP_KEYS

PREFIX = "mapreduce.manifest.committer."


def test_defaults_are_the_contracts() -> None:
    config = CommitterConfig()
    assert config.markers_type == "batched"
    assert config.markers_batch_interval_ms == 50
    assert config.markers_batch_threads == 20
    assert config.heartbeat_expiry_seconds == 120.0
    assert (config.markers_server_address, config.markers_server_port) == (None, 0)


def test_keys_are_read_with_and_without_the_spark_prefix() -> None:
    config = CommitterConfig.from_hadoop_conf(
        {
            PREFIX + "markers.type": " Direct ",
            "spark.hadoop." + PREFIX + "markers.batch.interval.ms": "10",
            PREFIX + "markers.batch.threads": "4",
            PREFIX + "heartbeat.expiry.seconds": "30.5",
            "spark.hadoop." + PREFIX + "markers.server.address": " driver-0.cluster.internal ",
            PREFIX + "markers.server.port": "7078",
        }
    )
    assert (config.markers_server_address, config.markers_server_port) == ("driver-0.cluster.internal", 7078)
    assert (config.markers_type, config.markers_batch_interval_ms, config.markers_batch_threads) == ("direct", 10, 4)
    assert config.heartbeat_expiry_seconds == 30.5
    assert CommitterConfig.from_hadoop_conf(config.to_hadoop_conf()) == config
    assert pickle.loads(pickle.dumps(config)) == config
    assert {PREFIX + "markers.type", PREFIX + "heartbeat.expiry.seconds"} <= set(HADOOP_KEYS)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("markers.type", "timeline_server_based"),
        ("markers.type", ""),
        ("markers.batch.interval.ms", "0"),
        ("markers.batch.interval.ms", "fast"),
        ("markers.batch.threads", "-1"),
        ("heartbeat.expiry.seconds", "0"),
        ("heartbeat.expiry.seconds", "nan"),
        ("heartbeat.expiry.seconds", "inf"),
        ("markers.server.address", "http://driver:7077"),
        ("markers.server.address", "two words"),
        ("markers.server.port", "65536"),
        ("markers.server.port", "-1"),
        ("markers.server.port", "any"),
    ],
)
def test_bad_values_are_errors_naming_key_and_value(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=PREFIX.replace(".", r"\.") + key.replace(".", r"\.")) as raised:
        CommitterConfig.from_hadoop_conf({PREFIX + key: value})
    assert repr(value) in str(raised.value)


def test_a_misspelt_marker_key_is_an_error() -> None:
    with pytest.raises(ConfigError, match=r"markers\.types: unknown"):
        CommitterConfig.from_hadoop_conf({PREFIX + "markers.types": "direct"})


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("markers_type", "DIRECT"),
        ("markers_batch_interval_ms", 0),
        ("markers_batch_threads", True),
        ("heartbeat_expiry_seconds", 0),
        ("heartbeat_expiry_seconds", "120"),
        ("markers_server_address", ""),
        ("markers_server_address", "a\nb"),
        ("markers_server_port", 70000),
        ("markers_server_port", "0"),
    ],
)
def test_bad_field_values_are_errors_naming_the_field(field: str, value: object) -> None:
    with pytest.raises(ConfigError, match=field):
        CommitterConfig(**{field: value})  # type: ignore[arg-type]


def test_an_empty_address_key_means_unset() -> None:
    assert CommitterConfig.from_hadoop_conf({PREFIX + "markers.server.address": " "}).markers_server_address is None
