"""Lets PySpark 4 find the ``manifest`` data source by itself: ``df.write.format("manifest")`` needs no call first.

At the first use of a Python data source in a session, PySpark imports every installed top-level module whose name
starts with ``pyspark_`` and registers its ``DefaultSource`` (``pyspark/sql/worker/lookup_data_sources.py``).
This is a single module, not a package, because editable installs map packages through an import hook that
``pkgutil.iter_modules`` cannot see; the wheel and editable wheel both carry this file as it is.

A data source found this way sees only the writer's options, never the session conf: committer keys go in as
``.option("mapreduce.manifest.committer.io.threads", "64")``, or ``manifest_committer.spark.register(spark)``
captures the session's ``spark.hadoop.mapreduce.manifest.committer.*`` keys.
"""

from __future__ import annotations

import logging

try:
    from manifest_committer.spark.datasource import ManifestDataSource as DefaultSource
except ImportError as error:  # pragma: no cover - PySpark imports this module for every session: never break it
    # PySpark's lookup does not catch errors: one raised here would break every Python data source of the session.
    logging.getLogger(__name__).warning("The manifest data source is not available: %s", error)

__all__ = ["DefaultSource"]
