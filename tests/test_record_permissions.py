"""Records on local disk get the mode data files get (the umask): whoever may read the data may read what says it
is complete, as another account really does here."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import manifest_committer as mc

REPOSITORY = Path(__file__).resolve().parents[1]
NOBODY = 65534

WRITER = """
import sys
import manifest_committer as mc

root = sys.argv[1]


def write(destination, protocol, **config):
    with mc.create_committer(destination, "job-records", protocol, config=mc.CommitterConfig(**config)) as committer:
        committer.setup_job()
        task = committer.setup_task("task_00000", "attempt_00000_0")
        with task.fs.open(task.work_path + "/dt=1/part-00000.csv", "wb") as stream:
            stream.write(b"a\\n")
        committer.commit_task(task)
        committer.commit_job()


write(root + "/manifest", "manifest", summary_report_directory=root + "/reports", cleanup_skipped=True)
write(root + "/transactional", "transactional", markers_type="direct")
"""


@pytest.fixture
def shared_directory() -> Iterator[Path]:
    """A directory every account may enter (pytest's own ``tmp_path`` is its owner's alone)."""
    directory = Path(tempfile.mkdtemp(prefix="records-"))
    directory.chmod(0o755)
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def write_jobs(root: Path, umask: int) -> None:
    """A manifest job and a transactional job, in a process of their own under ``umask``."""
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPOSITORY), os.environ.get("PYTHONPATH", "")])}
    subprocess.run(
        [sys.executable, "-c", WRITER, str(root)], check=True, umask=umask, env=environment, timeout=120, cwd=root
    )


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def records(root: Path) -> dict[str, Path]:
    """Every record the jobs wrote, by its path below ``root``."""
    found = {
        str(path.relative_to(root)): path
        for path in root.rglob("*")
        if path.is_file()
        and (
            path.name.startswith(("_SUCCESS", "_committed_", "_started_", "summary-"))
            or path.name.endswith("-manifest.json")
        )
    }
    names = {path.name.split("_")[1] if path.name.startswith("_") else path.name for path in found.values()}
    assert {"SUCCESS", "committed", "started"} <= names, sorted(found)
    assert any(name.endswith("-manifest.json") for name in names) and any(n.startswith("summary-") for n in names)
    return found


def data_files(root: Path) -> list[Path]:
    return [
        path
        for name in ("manifest", "transactional")
        for path in (root / name).rglob("*.csv")
        if "_temporary" not in path.parts
    ]


@pytest.mark.parametrize("umask", [0o022, 0o027, 0o002], ids=oct)
def test_records_get_the_mode_data_files_get(shared_directory: Path, umask: int) -> None:
    write_jobs(shared_directory, umask)
    data = data_files(shared_directory)
    assert len(data) == 2 and {mode(path) for path in data} == {0o666 & ~umask}
    wrong = {name: oct(mode(path)) for name, path in records(shared_directory).items() if mode(path) != mode(data[0])}
    assert not wrong, f"records whose mode is not the data files' {oct(mode(data[0]))}: {wrong}"


def read_as(uid: int, root: Path) -> dict[str, object]:
    """What a reader of account ``uid`` gets from the jobs' records, in a process forked and switched to that
    account (the interpreter's own files are not that account's to run, so it is not started anew)."""
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the forked reader
        status = 1
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            answer = json.dumps(read_records(root)).encode()
            with os.fdopen(write_end, "wb") as stream:
                stream.write(answer)
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as stream:
        answer = stream.read()
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0 and answer, "the other account's reader failed"
    result: dict[str, object] = json.loads(answer)
    return result


def read_records(root: Path) -> dict[str, object]:
    """What a reader makes of the records; an error as its type and message."""
    result: dict[str, object] = {"uid": os.getuid()}
    readers: dict[str, Callable[[], object]] = {
        "committed_files": lambda: mc.committed_files(str(root / "transactional")),
        "transactional _SUCCESS": lambda: mc.SuccessData.load(str(root / "transactional" / "_SUCCESS")).success,
        "manifest _SUCCESS": lambda: mc.SuccessData.load(str(root / "manifest" / "_SUCCESS")).success,
        "summary": lambda: mc.SuccessData.load(str(next((root / "reports").glob("summary-*.json")))).success,
        "task manifest": lambda: len(mc.TaskManifest.load(str(next(root.rglob("*-manifest.json")))).files),
    }
    for name, read in readers.items():
        try:
            result[name] = read()
        except Exception as error:
            result[name] = f"{type(error).__name__}: {error}"
    return result


@pytest.mark.skipif(os.geteuid() != 0, reason="switching to another account takes root")
def test_another_account_reads_the_records_of_data_it_may_read(shared_directory: Path) -> None:
    write_jobs(shared_directory, 0o022)
    expected = read_records(shared_directory)  # the writer's account; also imports all a reader needs
    assert expected["committed_files"] and expected["manifest _SUCCESS"] is True, expected
    committed = expected["committed_files"]
    assert isinstance(committed, list) and len(committed) == 1
    other = read_as(NOBODY, shared_directory)
    assert other == {**expected, "uid": NOBODY}
