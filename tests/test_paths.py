"""JobPaths: Hadoop 3.5's directory layout under the destination; ids that are safe as names."""

from __future__ import annotations

import pytest

from manifest_committer.errors import ConfigError
from manifest_committer.paths import JobPaths, check_id


def test_layout_matches_the_contract() -> None:
    paths = JobPaths("/data/out", "job_42", 3)
    assert paths.temporary_dir == "/data/out/_temporary"
    assert paths.job_dir == "/data/out/_temporary/job_42"
    assert paths.job_attempt_dir == "/data/out/_temporary/job_42/03"
    assert paths.task_attempts_dir == "/data/out/_temporary/job_42/03/tasks"
    assert paths.task_attempt_dir("attempt_1") == "/data/out/_temporary/job_42/03/tasks/attempt_1"
    assert paths.manifest_dir == "/data/out/_temporary/job_42/03/manifests"
    assert paths.manifest_path("task_1") == "/data/out/_temporary/job_42/03/manifests/task_1-manifest.json"
    assert paths.temp_manifest_path("attempt_1") == (
        "/data/out/_temporary/job_42/03/manifests/attempt_1-manifest.json.tmp"
    )
    assert paths.success_path == "/data/out/_SUCCESS"
    assert paths.temp_success_path == "/data/out/_temporary/job_42/03/_SUCCESS.tmp"


def test_object_store_paths_without_a_leading_slash() -> None:
    paths = JobPaths("bucket/warehouse/events", "5f0c8a5e-2d0b-4c59-9a0e-3b1f6f4c2a77")
    assert paths.job_attempt_dir == "bucket/warehouse/events/_temporary/5f0c8a5e-2d0b-4c59-9a0e-3b1f6f4c2a77/00"


@pytest.mark.parametrize(
    "value", ["job_202411220000_0001", "attempt_1_m_000000_0", "5f0c8a5e-2d0b-4c59", "a.b:c+d", "0"]
)
def test_valid_ids(value: str) -> None:
    assert check_id("job id", value) == value


@pytest.mark.parametrize("value", ["", "a/b", "..", "a..b", "with space", ".hidden", "-x", "tab\t", "ü"])
def test_invalid_ids_name_the_kind_and_value(value: str) -> None:
    with pytest.raises(ConfigError) as raised:
        check_id("task attempt id", value)
    assert "task attempt id" in str(raised.value)
    assert repr(value) in str(raised.value)
