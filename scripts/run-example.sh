#!/usr/bin/env bash
# Runs the main job: a PySpark job (local[*]) that writes 3,000,000 generated rows partitioned by dt and country
# through manifest_committer.spark.write into ./example-output/spark-events, reads them back, prints _SUCCESS.
# Options: --rows N, --dest DIR. The second example, without Spark: python examples/multi_task_write.py
. "$(dirname "$0")/_venv.sh" spark
python examples/spark_job.py "$@"
