"""shoal on Apache Spark: the Spark executor, the ``shoal`` data source and the write helpers.

PySpark is an optional dependency (``pip install shoal[spark]``); importing this package without it
raises a clear ImportError.
"""

from __future__ import annotations

from shoal.spark.session import local_session

__all__ = ["local_session"]

from shoal.spark.executor import SparkExecutor
from shoal.spark.services import compact, run_compaction, spark_table
from shoal.spark.write import write  # the function shadows its module's name on the package

__all__ += ["SparkExecutor", "compact", "run_compaction", "spark_table", "write"]
