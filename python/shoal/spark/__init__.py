"""shoal on Apache Spark: the Spark executor, the ``shoal`` data source and the write helpers.

PySpark is an optional dependency (``pip install shoal[spark]``); importing this package without it
raises a clear ImportError.
"""

from __future__ import annotations

try:
    import pyspark  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("shoal.spark needs PySpark: pip install 'shoal[spark]'") from exc

from shoal.spark.datasource import register
from shoal.spark.read import read  # the function shadows its module's name on the package
from shoal.spark.session import local_session

__all__ = ["local_session", "read", "register"]

from shoal.spark.executor import SparkExecutor
from shoal.spark.services import archive, clean, compact, run_compaction, spark_table
from shoal.spark.shipping import ARCHIVE_ALIAS, package_archive
from shoal.spark.write import write  # the function shadows its module's name on the package

__all__ += ["SparkExecutor", "archive", "clean", "compact", "run_compaction", "spark_table", "write"]
__all__ += ["ARCHIVE_ALIAS", "package_archive"]
