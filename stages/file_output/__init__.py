"""The ``v1`` and ``v2`` protocols' stages: Hadoop FileOutputCommitter's algorithms, with a journal.

``base``          their shared layout (``_temporary/<appAttempt>``) and the check of which job holds it
``setup_job``     claim ``_temporary/<appAttempt>`` for the job (``_JOB``)
``setup_task``    create ``_temporary/<appAttempt>/_temporary/<attempt>``
``merge_paths``   Hadoop's mergePaths: move a tree's files into another, never overwriting
``commit_task``   v1: move the attempt to ``<taskId>``; v2: merge it into the destination
``abort_task``    delete the attempt's directory
``journal``       the job commit's plan, written before the destination changes
``commit_job``    v1: merge every committed task; both: ``_SUCCESS``, then cleanup
``abort_job``     revert an interrupted v1 merge, then clean up
``cleanup``       delete ``_temporary/<appAttempt>``, the claim last
"""
