"""The stages of the commit protocols: one module and one class each, run through one gate.

A stage is one step of a protocol (its name in ``_SUCCESS`` and the statistics is Hadoop's where Hadoop has it).
Every store call of a stage goes through the stage base (``base.Stage``), which times it under an ``op_*`` name,
retries it under the committer's policy and counts it. Each protocol's own stages live in a folder of its own;
the ones several protocols share are here:

    ``base``                the stage base (run-once, timing, the gate) and ``StageContext``
    ``reads``               ``StateReads``: the gate of read-only tools (``status``) and of protocols' descriptions
    ``journal``             the job commit's write-ahead records: the one place that decides whether a
                            destination file is this job's (manifest, upload, v1/v2 through theirs)
    ``cleanup``             delete this job's ``_temporary/<jobId>`` and nothing of another job's
    ``save_success``        write ``_SUCCESS``: the visible commit point
    ``save_task_manifest``  publish a task manifest (temp file, then rename or ``put_if_absent``)
    ``marker_reads``        a job attempt's write markers, read through the gate (transactional, upload)
    ``destination_probe``   a set-up's first call: the destination's status, failing once on missing credentials
    ``success_aside``       an earlier ``_SUCCESS`` set aside at setup, put back by an abort before the commit point

    ``manifest/``           Hadoop's manifest committer (``protocols/manifest``)
    ``transactional/``      the transactional protocol (``protocols/transactional``)
    ``upload/``             the S3 upload protocol (``protocols/upload``)
    ``file_output/``        Hadoop FileOutputCommitter's v1 and v2 (``protocols/file_output``)

This folder installs as ``manifest_committer.stages``; it is never a top-level package of its own.
"""

from __future__ import annotations

if __name__ != "manifest_committer.stages":
    raise ImportError(f"import manifest_committer.stages, not {__name__!r}: stages is part of manifest_committer")
