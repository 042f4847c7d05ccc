"""Executors run the planner's task specs: locally on threads, or on Spark."""

from shoal.executor.local import LocalExecutor

__all__ = ["LocalExecutor"]
