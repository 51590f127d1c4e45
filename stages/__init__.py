"""The stages of the commit protocols, one module and one class each.

In protocol order (the stage name in ``_SUCCESS`` and the statistics is Hadoop's):

Task side
    ``setup_task``          SetupTaskStage           create the attempt's working directory
    ``scan_task_directory`` ScanTaskDirectoryStage   list the attempt's files (or the declared outputs)
    ``save_task_manifest``  SaveTaskManifestStage    publish the manifest by temp file and rename
    ``commit_task``         CommitTaskStage          scan, then save
    ``abort_task``          AbortTaskStage           delete the attempt's working directory

Job side
    ``setup_job``           SetupJobStage            create the job attempt's directories
    ``load_manifests``      LoadManifestsStage       read and check every manifest; nothing changes yet
    ``create_directories``  CreateDirectoriesStage   make the destination's directories
    ``rename_files``        RenameFilesStage         move every file into place
    ``validate_output``     ValidateOutputStage      check what was moved, before ``_SUCCESS``
    ``save_success``        SaveSuccessStage         write ``_SUCCESS``: the commit point
    ``cleanup``             CleanupStage             delete this job's ``_temporary/<jobId>``
    ``commit_job``          CommitJobStage           all of the job side, in that order
    ``abort_job``           AbortJobStage            undo an interrupted commit, then clean up

The ``v1`` and ``v2`` protocols (Hadoop FileOutputCommitter's algorithms, ``protocols/file_output/committer.py``)
    ``file_output_setup_job``   FileOutputSetupJobStage   claim ``_temporary/<appAttempt>`` for the job
    ``file_output_setup_task``  FileOutputSetupTaskStage  create ``_temporary/<appAttempt>/_temporary/<attempt>``
    ``merge_paths``             MergePathsStage           Hadoop's mergePaths: move a tree, never overwriting
    ``file_output_commit_task`` FileOutputCommitTaskStage v1: to ``<taskId>``; v2: into the destination
    ``file_output_abort_task``  FileOutputAbortTaskStage  delete the attempt's directory
    ``file_output_commit_job``  FileOutputCommitJobStage  v1: merge committed tasks; both: ``_SUCCESS``, cleanup
    ``file_output_cleanup``     FileOutputCleanupStage    delete ``_temporary/<appAttempt>``, the claim last
    ``file_output_abort_job``   FileOutputAbortJobStage   delete the temporary state; nothing is reverted
    (``file_output_base``: their shared layout and claim check.)

Shared: ``base`` (the stage base: run-once, timing, the gate every store call passes through),
``journal`` (the job commit's write-ahead records: the one place that decides whether a destination file is
this job's) and ``job_types`` (what one stage hands another). This folder installs as
``manifest_committer.stages``; it is never a top-level package of its own.
"""

from __future__ import annotations

if __name__ != "manifest_committer.stages":
    raise ImportError(f"import manifest_committer.stages, not {__name__!r}: stages is part of manifest_committer")
