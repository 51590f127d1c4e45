"""Writer options that no writer knows: an error naming the option, with the nearest known one.

Writer options are case-insensitive, as Spark's are (``maxrecordsperfile`` is ``maxRecordsPerFile``), so a
writer compares them lower-cased; the suggestion is spelled as the documentation spells it, and for what looks
like a committer key (a short form, a misspelt prefix) it is the full committer key.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from ..config import SPARK_HADOOP_PREFIX, nearest_key
from ..errors import ConfigError

SPELLINGS = {
    name.lower(): name
    for name in (
        "maxRecordsPerFile",
        "maxOpenFiles",
        "compression",
        "header",
        "partitionOverwriteMode",
        "partitionBy",
        "path",
        "format",
        "protocol",
        "storage_options",
        "jobId",
        "jobSetUp",
    )
}
"""Every writer option as the documentation spells it, by its lower-case form."""


def check_options(keys: Iterable[str], known: Iterable[str], what: str, where: str) -> None:
    """``ConfigError`` naming the first of ``keys`` (lower case) that is not in ``known`` (lower case), with a
    did-you-mean when one is near: ``unknown <what> '<key>' <where>; did you mean `maxRecordsPerFile`?``."""
    known_keys = sorted(known)
    for key in sorted(keys):
        if key not in known_keys:
            raise ConfigError(f"unknown {what} {key!r} {where}{_suggestion(key, known_keys)}")


def _suggestion(key: str, known: list[str]) -> str:
    committer_key = nearest_key(key)
    if committer_key is not None:
        prefix = SPARK_HADOOP_PREFIX if key.startswith(SPARK_HADOOP_PREFIX) else ""
        return f"; did you mean `{prefix}{committer_key}`?"
    nearest = difflib.get_close_matches(key, known, n=1, cutoff=0.7)
    if not nearest:
        return ""
    return f"; did you mean `{SPELLINGS.get(nearest[0], nearest[0])}`?"
