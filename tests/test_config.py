"""CommitterConfig: Hadoop's keys, strict about its own families, frozen and picklable."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from manifest_committer.config import HADOOP_KEYS, CommitterConfig
from manifest_committer.errors import CommitterError, ConfigError

M = "mapreduce.manifest.committer."
F = "mapreduce.fileoutputcommitter."

DOCUMENTED_KEYS = {
    M + "io.threads": ("io_threads", "64", 64),
    M + "manifest.save.attempts": ("manifest_save_attempts", "2", 2),
    M + "delete.target.files": ("delete_target_files", "true", True),
    M + "validate.output": ("validate_output", "TRUE", True),
    M + "summary.report.directory": ("summary_report_directory", "s3://bucket/reports", "s3://bucket/reports"),
    M + "diagnostics.manifest.directory": ("diagnostics_manifest_directory", "/tmp/manifests", "/tmp/manifests"),
    M + "cleanup.parallel.delete": ("cleanup_parallel_delete", "false", False),
    M + "cleanup.parallel.delete.base.first": ("cleanup_parallel_delete_base_first", "true", True),
    F + "marksuccessfuljobs": ("mark_successful_jobs", "false", False),
    F + "cleanup.skipped": ("cleanup_skipped", "true", True),
    F + "cleanup-failures.ignored": ("cleanup_failures_ignored", "true", True),
}


def test_defaults_are_hadoops() -> None:
    config = CommitterConfig()
    assert config.io_threads == 32
    assert config.manifest_save_attempts == 5
    assert config.writer_queue_capacity == 32
    assert (config.delete_target_files, config.validate_output) == (False, False)
    assert (config.cleanup_parallel_delete, config.cleanup_parallel_delete_base_first) == (True, False)
    assert (config.mark_successful_jobs, config.cleanup_skipped, config.cleanup_failures_ignored) == (
        True,
        False,
        False,
    )
    assert config.summary_report_directory is None and config.diagnostics_manifest_directory is None


def test_every_contract_key_is_known() -> None:
    assert set(DOCUMENTED_KEYS) <= set(HADOOP_KEYS)
    assert list(HADOOP_KEYS) == sorted(HADOOP_KEYS)


@pytest.mark.parametrize("prefix", ["", "spark.hadoop."])
@pytest.mark.parametrize("key", sorted(DOCUMENTED_KEYS))
def test_each_key_is_parsed(key: str, prefix: str) -> None:
    field, text, value = DOCUMENTED_KEYS[key]
    config = CommitterConfig.from_hadoop_conf({prefix + key: text})
    assert getattr(config, field) == value
    assert getattr(config, field) != getattr(CommitterConfig(), field)


def test_all_keys_together() -> None:
    config = CommitterConfig.from_hadoop_conf({key: text for key, (_, text, _) in DOCUMENTED_KEYS.items()})
    for field, _, value in DOCUMENTED_KEYS.values():
        assert getattr(config, field) == value


def test_values_are_trimmed_and_blank_paths_are_unset() -> None:
    config = CommitterConfig.from_hadoop_conf(
        {M + "io.threads": " 8 ", M + "validate.output": " true ", M + "summary.report.directory": "  "}
    )
    assert (config.io_threads, config.validate_output, config.summary_report_directory) == (8, True, None)


def test_non_string_values_are_accepted() -> None:
    config = CommitterConfig.from_hadoop_conf({M + "io.threads": 4, M + "validate.output": True})  # type: ignore[dict-item]
    assert (config.io_threads, config.validate_output) == (4, True)


@pytest.mark.parametrize("key", [M + "io.thread", "spark.hadoop." + M + "no.such.option", F + "marksuccessfuljob"])
def test_an_unknown_key_of_the_family_names_the_key(key: str) -> None:
    with pytest.raises(ConfigError) as raised:
        CommitterConfig.from_hadoop_conf({key: "1"})
    assert key in str(raised.value)
    assert isinstance(raised.value, CommitterError)


@pytest.mark.parametrize(
    ("key", "suggestion"),
    [
        (M + "io.thread", M + "io.threads"),
        (M + "io_threads", M + "io.threads"),
        ("spark.hadoop." + M + "validate.outputs", "spark.hadoop." + M + "validate.output"),
        (F + "marksuccessfuljob", F + "marksuccessfuljobs"),
    ],
)
def test_a_mistyped_key_suggests_the_nearest_known_key(key: str, suggestion: str) -> None:
    with pytest.raises(ConfigError) as raised:
        CommitterConfig.from_hadoop_conf({key: "1"})
    assert str(raised.value) == f"{key}: unknown committer configuration key; did you mean `{suggestion}`?"


def test_nonsense_gets_no_suggestion() -> None:
    """Every key shares the family prefix; only the rest counts, so nothing is 'near' a made-up key."""
    with pytest.raises(ConfigError) as raised:
        CommitterConfig.from_hadoop_conf({M + "no.such.option": "1"})
    assert str(raised.value) == f"{M}no.such.option: unknown committer configuration key"


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (M + "io.threads", "lots"),
        (M + "io.threads", "0"),
        (M + "io.threads", "-3"),
        (M + "manifest.save.attempts", "1.5"),
        (M + "validate.output", "yes"),
        ("spark.hadoop." + F + "cleanup.skipped", "1"),
    ],
)
def test_a_bad_value_names_key_and_value(key: str, value: str) -> None:
    with pytest.raises(ConfigError) as raised:
        CommitterConfig.from_hadoop_conf({key: value})
    assert key in str(raised.value)
    assert repr(value) in str(raised.value)


def test_other_keys_are_ignored() -> None:
    config = CommitterConfig.from_hadoop_conf(
        {
            "fs.defaultFS": "hdfs://nn",
            "spark.executor.memory": "4g",
            M + "store.operations.classname": "org.apache.hadoop.fs.azurebfs.commit.AbfsManifestStoreOperations",
            F + "algorithm.version": "2",
        }
    )
    assert config == CommitterConfig()


@pytest.mark.parametrize(
    ("key", "field", "text", "value"),
    [
        (M + "io.rate", "io_rate_limit", "250", 250.0),
        (M + "store.retry.attempts", "store_retry_attempts", "9", 9),
        (M + "store.retry.interval", "store_retry_interval", "0.5", 0.5),
        (M + "store.retry.max.wait", "store_retry_max_wait", "4", 4.0),
        (M + "store.retry.max.time", "store_retry_max_time", "0", 0.0),
        (M + "store.direct.requests", "store_direct_requests", "false", False),
    ],
)
def test_keys_of_our_own_are_parsed(key: str, field: str, text: str, value: object) -> None:
    """Keys Hadoop has no use for (it ignores them), so a Spark job configures the retries in one place."""
    config = CommitterConfig.from_hadoop_conf({"spark.hadoop." + key: text})
    assert getattr(config, field) == value != getattr(CommitterConfig(), field)


def test_overrides_win() -> None:
    config = CommitterConfig.from_hadoop_conf({M + "io.threads": "8"}, io_threads=2, rename_batch_size=7)
    assert (config.io_threads, config.rename_batch_size) == (2, 7)


def test_picklable() -> None:
    config = CommitterConfig(io_threads=3, validate_output=True, summary_report_directory="memory://r")
    assert pickle.loads(pickle.dumps(config)) == config


def test_frozen() -> None:
    config = CommitterConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.io_threads = 2  # type: ignore[misc]


def test_to_hadoop_conf_round_trip() -> None:
    config = CommitterConfig.from_hadoop_conf({key: text for key, (_, text, _) in DOCUMENTED_KEYS.items()})
    conf = config.to_hadoop_conf()
    assert set(conf) == set(HADOOP_KEYS)
    assert all(isinstance(v, str) for v in conf.values())
    assert CommitterConfig.from_hadoop_conf(conf) == config
    assert CommitterConfig.from_hadoop_conf(CommitterConfig().to_hadoop_conf()) == CommitterConfig()
    assert conf[M + "validate.output"] == "true"


@pytest.mark.parametrize(
    "change",
    [
        {"io_threads": 0},
        {"io_threads": True},
        {"manifest_save_attempts": "5"},
        {"rename_batch_size": -1},
        {"save_retry_interval": -0.1},
        {"store_retry_max_time": -1},
        {"validate_output": "true"},
    ],
)
def test_direct_construction_is_checked(change: dict[str, object]) -> None:
    with pytest.raises(ConfigError) as raised:
        CommitterConfig(**change)  # type: ignore[arg-type]
    assert next(iter(change)) in str(raised.value)
