"""LocalStore: a whole-file write is atomic for readers in other threads and processes."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from manifest_committer.store import open_store
from manifest_committer.store.local import is_write_in_progress


def test_a_reader_never_sees_a_rewritten_file_empty_or_half_written(tmp_path: Path) -> None:
    store, root = open_store(str(tmp_path))
    path = f"{root}/heartbeat"
    versions = [bytes([65 + n]) * 200_000 for n in range(5)]
    store.write_bytes(path, versions[0])
    seen: set[bytes] = set()
    done = threading.Event()

    def read_while_written() -> None:
        while not done.is_set():
            seen.add(store.read_bytes(path))

    reader = threading.Thread(target=read_while_written)
    reader.start()
    try:
        for round_ in range(60):
            store.write_bytes(path, versions[round_ % len(versions)])
    finally:
        done.set()
        reader.join()
    assert seen <= set(versions), "a reader saw a truncated or partly written file"
    assert os.listdir(tmp_path) == ["heartbeat"], "no temporary file is left behind"


def test_temporary_names_are_recognised_and_data_names_are_not() -> None:
    assert is_write_in_progress(".MARKERS0.k2j3_x.tmp")
    assert not is_write_in_progress("part-0.tmp")
    assert not is_write_in_progress(".hidden.marker.CREATE")
