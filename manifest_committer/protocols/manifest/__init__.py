"""The ``manifest`` protocol: Hadoop 3.5's manifest committer (its stages are in ``stages/manifest/``)."""
