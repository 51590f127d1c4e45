"""The file system type under a path, from the mount table."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from manifest_committer.writing.filesystems import file_system_type, on_tmpfs

MOUNTS = """\
/dev/vda / ext4 rw,relatime,discard 0 0
tmpfs /dev/shm tmpfs rw,nosuid,nodev 0 0
/dev/loop0 /mnt/with\\040space ext4 rw,relatime 0 0
tmpfs /mnt/with\\040space/ram tmpfs rw 0 0
/dev/loop1 /dev/shm ext4 rw 0 0
"""


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/", "ext4"),
        ("/tmp/x", "ext4"),
        ("/mnt/with space/data", "ext4"),  # the table escapes the space
        ("/mnt/with space/ram/x", "tmpfs"),  # the deepest mount point wins
        ("/mnt/with spaces", "ext4"),  # a name that only starts like a mount point
        ("/dev/shm/x", "ext4"),  # of two mounts at one point, the later one is on top
    ],
)
def test_the_deepest_mount_point_above_a_path_names_its_type(tmp_path: Path, path: str, expected: str) -> None:
    table = tmp_path / "mounts"
    table.write_text(MOUNTS)
    assert file_system_type(path, table) == expected


def test_no_mount_table_means_unknown(tmp_path: Path) -> None:
    assert file_system_type("/", tmp_path / "missing") is None


def test_this_machines_temporary_directory(tmp_path: Path) -> None:
    """Agrees with ``stat -f`` (GNU coreutils), which asks the kernel."""
    kernel = subprocess.run(["stat", "-f", "-c", "%T", str(tmp_path)], capture_output=True, text=True, check=True)
    assert on_tmpfs(str(tmp_path)) == (kernel.stdout.strip() == "tmpfs")
