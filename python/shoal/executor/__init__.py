"""Executors run the planner's task specs: locally on threads, or on Spark
(``shoal.spark.SparkExecutor``)."""

from shoal.executor.base import Executor
from shoal.executor.local import LocalExecutor

__all__ = ["Executor", "LocalExecutor"]
