"""Statistic and stage names, as Hadoop's ManifestCommitterStatisticNames spells them; users grep for these."""

from __future__ import annotations

# Stages of the job.
COMMITTER_COMMIT_JOB = "committer_commit_job"
JOB_STAGE_SETUP = "job_stage_setup"
JOB_STAGE_LOAD_MANIFESTS = "job_stage_load_manifests"
JOB_STAGE_CREATE_TARGET_DIRS = "job_stage_create_target_dirs"
JOB_STAGE_RENAME_FILES = "job_stage_rename_files"
JOB_STAGE_OPTIONAL_VALIDATE_OUTPUT = "job_stage_optional_validate_output"
JOB_STAGE_SAVE_SUCCESS_MARKER = "job_stage_save_success_marker"
JOB_STAGE_CLEANUP = "job_stage_cleanup"
JOB_STAGE_ABORT = "job_stage_abort"

# Stages of a task.
TASK_STAGE_SETUP = "task_stage_setup"
TASK_STAGE_SCAN_DIRECTORY = "task_stage_scan_directory"
TASK_STAGE_COMMIT = "task_stage_commit"
TASK_STAGE_SAVE_MANIFEST = "task_stage_save_manifest"
TASK_STAGE_SAVE_TASK_MANIFEST = "task_stage_save_task_manifest"
TASK_STAGE_SAVE_SUMMARY_FILE = "task_stage_save_summary_file"
TASK_STAGE_ABORT_TASK = "task_stage_abort_task"
# Not in Hadoop: the v1/v2 task commit's move of an attempt's files (FileOutputCommitter keeps no statistics).
TASK_STAGE_MERGE_FILES = "task_stage_merge_files"

# Counters and samples.
COMMITTER_FILES_COMMITTED = "committer_files_committed"
COMMITTER_BYTES_COMMITTED = "committer_bytes_committed"
COMMITTER_TASKS_COMPLETED = "committer_tasks_completed"
COMMITTER_TASKS_FAILED = "committer_tasks_failed"
COMMITTER_TASK_FILE_COUNT = "committer_task_file_count"
COMMITTER_TASK_FILE_SIZE = "committer_task_file_size"
COMMITTER_TASK_DIRECTORY_COUNT = "committer_task_directory_count"
COMMITTER_TASK_DIRECTORY_DEPTH = "committer_task_directory_depth"
COMMITTER_TASK_MANIFEST_FILE_SIZE = "committer_task_manifest_file_size"
COMMIT_FILE_RENAME = "commit_file_rename"
COMMIT_FILE_RENAME_RECOVERED = "commit_file_rename_recovered"
# Not in Hadoop: directories a job commit moved into the destination whole, each with its one file
# (stages/manifest/directory_moves.py).
COMMITTER_DIRECTORIES_MOVED = "committer_directories_moved"
# Not in Hadoop: files a repeated job commit found already in place.
COMMITTER_FILES_ALREADY_COMMITTED = "committer_files_already_committed"
# Not in Hadoop: retries of transient store errors, and manifests copied for diagnostics.
STORE_IO_RETRY = "store_io_retry"
STORE_IO_RATE_LIMITED = "store_io_rate_limited"
# Not in Hadoop: each worker process of a job commit (io.processes), from its start to its store opened.
COMMITTER_WORKER_PROCESS_START = "committer_worker_process_start"

# Store operations.
OP_CREATE_DIRECTORIES = "op_create_directories"
OP_MKDIRS = "op_mkdirs"
OP_MKDIR_RETURNED_FALSE = "op_mkdir_returned_false"
OP_PREPARE_DIR_ANCESTORS = "op_prepare_dir_ancestors"
OP_DELETE_FILE_UNDER_DESTINATION = "op_delete_file_under_destination"
OP_DELETE = "op_delete"
OP_DELETE_DIR = "op_delete_dir"
OP_GET_FILE_STATUS = "op_get_file_status"
OP_LIST_STATUS = "op_list_status"
OP_LOAD_MANIFEST = "op_load_manifest"
OP_LOAD_ALL_MANIFESTS = "op_load_all_manifests"
OP_RENAME = "op_rename"
OP_SAVE_FILE = "op_save_file"
OP_COPY_FILE = "op_copy_file"
# Not in Hadoop: reads of small state files (a previous _SUCCESS, commit markers).
OP_LOAD_FILE = "op_load_file"

# The upload protocol's S3 calls, as Hadoop's S3A names them (StoreStatisticNames, CommitterStatisticNames).
OP_PUT_IF_ABSENT = "object_put_request"
OP_COMPLETE_UPLOAD = "multipart_upload_completed"
OP_ABORT_UPLOAD = "object_multipart_aborted"
OP_LIST_UPLOADS = "object_multipart_list"
COMMITTER_COMMITS_COMPLETED = "committer_commits_completed"
COMMITTER_COMMITS_ABORTED = "committer_commits_aborted"
