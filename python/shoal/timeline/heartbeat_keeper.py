"""A process that keeps a pending write's heartbeat while another process lives.

A write through Spark's data source (``df.write.format("shoal")``) is planned in a short-lived
driver-side Python process and committed in another one, so no process of the write lives
through its Spark job to beat (:mod:`shoal.timeline.heartbeat`). The planning process starts
this keeper, detached, watching the Spark driver (the JVM). It rewrites the instant's heartbeat
file every interval while the instant is pending and the watched process lives, and stops:

* when the write has committed or was rolled back: it deletes a heartbeat file it may have
  rewritten after the commit deleted it;
* when the watched process is gone (the driver died): the heartbeat then expires, and other
  writers roll the write back, as they would a Hudi writer that died.

    python -m shoal.timeline.heartbeat_keeper BASE_URI INSTANT_TIME INTERVAL_MS PID START_TICKS
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from collections.abc import Sequence

from shoal.config.table_config import TableConfig
from shoal.fs.storage import Storage
from shoal.timeline.heartbeat import heartbeat_path
from shoal.timeline.instant import State
from shoal.timeline.timeline import Timeline

log = logging.getLogger(__name__)

_LAUNCHER = (
    "import subprocess, sys; subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL, "
    "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)"
)


def process_start(pid: int) -> int | None:
    """The start time of process ``pid`` (clock ticks since boot, from ``/proc``), which tells a
    process apart from a later one given the same pid; None when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            stat = f.read()
    except OSError:
        return None
    # The command name, in parentheses, may hold spaces: fields count from its closing one.
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[19])


def ancestor_named(name: str) -> int | None:
    """The nearest ancestor of this process whose executable is called ``name``; None when
    there is none (or no ``/proc``)."""
    pid = os.getppid()
    while pid > 1:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                command = f.read().split(b"\0", 1)[0].decode(errors="replace")
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
                stat = f.read()
        except OSError:
            return None
        if os.path.basename(command) == name:
            return pid
        pid = int(stat[stat.rindex(")") + 2 :].split()[1])
    return None


def start_keeper(base_uri: str, instant_time: str, interval_ms: int, watched_pid: int) -> bool:
    """Starts a detached keeper of ``instant_time``'s heartbeat that lives as long as the write
    is pending and process ``watched_pid`` lives. False when it could not be started (no
    ``/proc`` to watch the process with, or no process could be started): the write then has
    its first beat only, and other writers may take it for a failed one once that expires."""
    start = process_start(watched_pid)
    if start is None:
        return False
    command = [
        sys.executable,
        "-m",
        "shoal.timeline.heartbeat_keeper",
        base_uri,
        instant_time,
        str(interval_ms),
        str(watched_pid),
        str(start),
    ]
    try:
        # Started through a launcher that exits at once: the keeper is nobody's child here, so
        # it leaves no zombie behind in a Python worker that Spark keeps for later jobs.
        subprocess.run(
            [sys.executable, "-c", _LAUNCHER, *command],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=True,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        log.warning("no keeper for the heartbeat of instant %s: %s", instant_time, exc)
        return False
    return True


def keep(storage: Storage, instant_time: str, interval_ms: int, watched_pid: int, watched_start: int) -> str:
    """Beats until the write ends or the watched process is gone; returns why it stopped
    (``"ended"`` or ``"watched process gone"``)."""
    config = TableConfig.load(storage)
    while True:
        if process_start(watched_pid) != watched_start:
            return "watched process gone"
        if not _pending(storage, config, instant_time):
            return "ended"
        try:
            storage.write_bytes(heartbeat_path(instant_time), b"")
        except OSError as exc:
            log.warning("heartbeat of instant %s not written: %s", instant_time, exc)
        if not _pending(storage, config, instant_time):
            # The commit (or rollback) deleted the heartbeat before this beat wrote it again.
            storage.delete(heartbeat_path(instant_time), missing_ok=True)
            return "ended"
        time.sleep(interval_ms / 1000.0)


def _pending(storage: Storage, config: TableConfig, instant_time: str) -> bool:
    instant = Timeline.load(storage, config).get(instant_time)
    return instant is not None and instant.state != State.COMPLETED


def main(argv: Sequence[str]) -> int:
    base_uri, instant_time, interval_ms, pid, start = argv
    keep(Storage(base_uri), instant_time, int(interval_ms), int(pid), int(start))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
