"""Recognising a file that went missing under a Spark job.

A Spark task's Python exception reaches the driver as Spark's error (``PythonException`` for
DataFrame jobs, ``Py4JJavaError`` for RDD jobs) carrying the task's traceback as text. The
write needs to tell a missing file from other failures (a concurrent clean or rollback deleted
it: the write plans again, or ends in a conflict), so the task's FileNotFoundError is rebuilt
from that text, as ``executor.task_error`` rebuilds shoal's own errors.
"""

from __future__ import annotations

import re

from py4j.protocol import Py4JJavaError
from pyspark.errors import PythonException

_TRACEBACK = "Traceback (most recent call last):"
_MISSING = re.compile(r"^(?:builtins\.)?FileNotFoundError: (.*)$")


def missing_file(exc: BaseException) -> FileNotFoundError | None:
    """The FileNotFoundError behind ``exc``: ``exc`` itself, or the one a Spark task raised
    (the exception that ended the task, not one it handled on the way); None otherwise."""
    if isinstance(exc, FileNotFoundError):
        return exc
    if not isinstance(exc, (PythonException, Py4JJavaError)):
        return None
    text = str(exc)
    start = text.rfind(_TRACEBACK)
    if start < 0:
        return None
    # The last traceback is the task's final exception (chained ones come before it): its
    # frames are indented, the first line that is not names the exception.
    for line in text[start:].splitlines()[1:]:
        if not line or line[0].isspace():
            continue
        found = _MISSING.match(line)
        return FileNotFoundError(found.group(1)) if found else None
    return None
