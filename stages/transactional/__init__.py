"""The ``transactional`` protocol's stages: files written in place, published by ``_committed_<tid>``.

``setup_job``     write ``_started_<tid>`` and create the job's state
``commit_task``   record which of the attempt's files (in the destination already) it commits
``abort_task``    delete the attempt's files from the destination
``commit_job``    delete other attempts' files (found by their markers), write ``_committed_<tid>`` at the root,
                  then in each other directory of the job's files (``directory_records``)
``abort_job``     delete exactly the files the job's markers name, unless the job is committed
``directory_records``  write the ``_committed_<tid>`` of each directory the job wrote into, after the root's
"""
