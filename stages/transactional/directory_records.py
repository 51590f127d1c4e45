"""The transactional protocol's per-directory ``_committed_<tid>`` records: written after the commit point, removed
by an abort before it.

The root's ``_committed_<tid>`` is the commit point and lists every file of the transaction; a reader of one
partition reads no record above its URL (docs/safety.md, "Crafted input"), so each directory holding a file the
transaction adds or removes gets a record of its own, listing that directory's files (``directory_records``).
They are written after the root's, never before: a reader of a partition may see a commit late (a driver killed
in between; a rerun of ``commit_job``, or an abort, of the committed job writes the missing ones), but never a
commit the root did not make. Each is one small file; they are written in parallel on the job's pool.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from ...parallel import run_bounded
from ...protocols.transactional.records import TransactionPaths, TransactionRecord, directory_records
from ...store import LinkInPathError
from ..base import Stage

log = logging.getLogger(__name__)


def write_directory_records(gate: Stage[Any, Any], transaction: TransactionPaths, record: TransactionRecord) -> int:
    """Write the record of every directory below the destination that ``record`` (the root's) names a file in;
    returns how many. Rewriting one that is in place writes the same bytes."""
    records = directory_records(record)

    def write(directory: str) -> None:
        gate.write_bytes(transaction.committed_in(directory), records[directory].to_json())

    run_bounded(gate.context.pool, sorted(records), write, max_in_flight=gate.context.max_in_flight)
    if records:
        log.info("%s: wrote _committed_%s in %d directories", gate.name, transaction.tid, len(records))
    return len(records)


def delete_directory_records(gate: Stage[Any, Any], transaction: TransactionPaths, relatives: Iterable[str]) -> int:
    """Delete this transaction's record, if there is one, from each directory below the destination holding one
    of the destination-relative paths ``relatives`` (the files an abort deletes); returns how many were there.

    Called only while the root's record is absent (before the commit point), when no directory record was
    written; one there was left by hand or crafted, and would make a later job of the same id readable in that
    directory before its commit. Never through a symbolic link out of the destination (skipped, logged)."""
    directories = sorted({relative.rpartition("/")[0] for relative in relatives} - {""})
    deleted: list[bool] = []

    def delete(directory: str) -> bool:
        path = transaction.committed_in(directory)
        try:
            return gate.delete_file_below(path)
        except LinkInPathError:
            log.warning("%s: not deleting %s: a directory on the way is a symbolic link", gate.name, path)
            return False

    run_bounded(
        gate.context.pool, directories, delete, max_in_flight=gate.context.max_in_flight, on_result=deleted.append
    )
    found = sum(deleted)
    if found:
        log.warning("%s: deleted %d _committed_%s records without the root's", gate.name, found, transaction.tid)
    return found
