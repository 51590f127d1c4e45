"""The ``upload`` protocol's stages (S3): pending multipart uploads completed at job commit, never overwriting.

``setup_job``     write the job's ``protocol`` sign
``commit_task``   record the attempt's pending uploads in a manifest of its own
``abort_task``    abort the attempt's uploads, by their ids
``commit_job``    complete the accepted attempts' uploads (``If-None-Match: *``), abort the others
``abort_job``     abort every incomplete upload of the job; revert a partial commit
``state``         what the job commit and aborts read back from the job's state
"""
