"""The ``manifest`` protocol's stages (Hadoop 3.5's manifest committer), in protocol order.

Task side:

    ``setup_task``           create the attempt's working directory
    ``scan_task_directory``  list the attempt's files (or the declared outputs) into manifest entries
    ``commit_task``          scan, then publish the manifest (``save_task_manifest``)
    ``abort_task``           delete the attempt's working directory

Job side:

    ``setup_job``            create the job attempt's directories
    ``load_manifests``       read and check every manifest; nothing in the destination changes yet
    ``create_directories``   make the destination's directories
    ``rename_files``         move every file into place, in parallel batches, journalled
    ``directory_moves``      which new destination directories of one file a task's directory moves to whole
    ``validate_output``      check what was moved, before ``_SUCCESS``
    ``commit_job``           all of the job side in that order, then ``save_success`` and ``cleanup``
    ``abort_job``            revert an interrupted commit, then clean up
    ``plan_abort``           what ``abort_job`` would do, changing nothing
    ``job_types``            what one of these stages hands another
"""
