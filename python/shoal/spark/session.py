"""A local SparkSession set up the way shoal's tasks need it."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

try:
    from pyspark.sql import SparkSession
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("shoal.spark needs PySpark: pip install 'shoal[spark]'") from exc


def local_session(
    master: str = "local[2]",
    app_name: str = "shoal",
    conf: Mapping[str, Any] | None = None,
    fast_start: bool = False,
) -> SparkSession:
    """Returns a SparkSession on ``master`` whose Python workers run this interpreter.

    Workers must import pyarrow and the shoal extension, so they run ``sys.executable`` (the
    interpreter of this virtual environment) unless ``PYSPARK_PYTHON`` says otherwise. The driver
    binds to loopback. ``fast_start`` adds JVM flags that cut start-up time (tests and demos);
    ``conf`` entries override everything here.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    settings: dict[str, str] = {
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "4",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.execution.arrow.pyspark.validateSchema.enabled": "true",
        "spark.python.worker.reuse": "true",
        "spark.sql.session.timeZone": "UTC",
    }
    if fast_start:
        flags = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
        settings["spark.driver.extraJavaOptions"] = flags
        settings["spark.executor.extraJavaOptions"] = flags
    settings.update({k: str(v) for k, v in (conf or {}).items()})
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
