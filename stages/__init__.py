"""The stages of the manifest committer protocol, one module and one class each.

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

Shared: ``base`` (the stage base: run-once, timing, the gate every store call passes through),
``journal`` (the job commit's write-ahead records: the one place that decides whether a destination file is
this job's) and ``job_types`` (what one stage hands another). This folder installs as
``manifest_committer.stages``; it is never a top-level package of its own.
"""

from __future__ import annotations

if __name__ != "manifest_committer.stages":
    raise ImportError(f"import manifest_committer.stages, not {__name__!r}: stages is part of manifest_committer")
