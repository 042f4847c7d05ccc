"""``shoal <command> <table path>``: table info, timeline (active or archived), a commit's files and
extra metadata, file slices, write and file size statistics, rows, and the table services
(compact, clean, archive, rollback, savepoint, restore); ``shoal demo``."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pyarrow as pa
from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

import shoal
from shoal.cli.where import where_filters
from shoal.config.write_config import FILE_SYSTEM_LOCK_PATH
from shoal.errors import InvalidArgumentError, InvalidOptionError, ShoalError
from shoal.timeline.file_lock import FileLock
from shoal.timeline.heartbeat import heartbeat_age
from shoal.timeline.instant import Action, Instant, State
from shoal.timeline.timeline import DATA_ACTIONS, Timeline

# Without markup: table names, partition paths, instants and row values are printed as they
# are, never read as rich markup (a value such as "[/x]" would raise, "[red]a" would print "a").
console = Console(markup=False)
# Errors go to stderr: a script reading the output of a command that failed reads nothing.
errors = Console(markup=False, stderr=True)


def _grid(title: str | None, columns: Sequence[str], instants: Sequence[str] = ()) -> RichTable:
    """A table whose values are never cut short: on a narrow terminal (or the 80 columns of a
    pipe) long values fold onto more lines rather than end in an ellipsis, so file ids, paths
    and values can be copied as they are; the ``instants`` columns keep each time whole on one
    line."""
    out = RichTable(title=title)
    for col in columns:
        if col in instants:
            out.add_column(col, no_wrap=True, min_width=17)
        else:
            out.add_column(col, overflow="fold")
    return out


def _options(args: argparse.Namespace) -> dict[str, str]:
    """The write options given by ``--option``."""
    options: dict[str, str] = {}
    for item in getattr(args, "option", None) or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InvalidOptionError(f"--option takes KEY=VALUE, got {item!r}")
        options[key.strip()] = value.strip()
    return options


def _table(args: argparse.Namespace) -> shoal.Table:
    """The table at ``args.path``, with the write options given by ``--option``."""
    return shoal.Table(args.path, options=_options(args))


def _info(args: argparse.Namespace) -> int:
    t = _table(args)
    cfg = t.config
    grid = _grid(f"table {cfg.table_name}", ("key", "value"))
    grid.show_header = False
    rows = [
        ("path", t.path),
        ("type", cfg.table_type.value),
        ("table version", str(cfg.table_version)),
        ("record key", ",".join(cfg.record_key_fields)),
        ("partition fields", ",".join(cfg.partition_fields) or "(non-partitioned)"),
        ("ordering field", cfg.precombine_field or "-"),
        ("merge ordering", cfg.merge_ordering.value),
        ("latest instant", t.latest_instant() or "-"),
        ("file groups", str(len(t.file_slices()))),
        *_writers(t),
    ]
    for k, v in rows:
        grid.add_row(k, v)
    console.print(grid)
    return 0


def _writers(t: shoal.Table) -> list[tuple[str, str]]:
    """What an operator needs to tell live writers from dead ones: each pending write with the
    age of its heartbeat, each pending table service (a clean, rollback or restore a crash left
    is finished by the next one), and who holds the table's lock."""
    timeline = Timeline.load(t.storage, t.config)
    rows = []
    for inst in timeline.pending():
        if inst.action not in DATA_ACTIONS:
            rows.append(("pending", f"{inst.action.value} {inst.requested_time} ({inst.state.name.lower()})"))
            continue
        age = heartbeat_age(t.storage, inst.requested_time)
        beat = "no heartbeat" if age is None else f"last heartbeat {age:.0f} s ago"
        rows.append(
            ("pending", f"{inst.action.value} {inst.requested_time} ({inst.state.name.lower()}, {beat})")
        )
    lock = FileLock(t.storage, t.write_config.get(FILE_SYSTEM_LOCK_PATH), 0, 1, 1)
    rows.append(("lock", lock.holder() or "free"))
    return rows


def _timeline(args: argparse.Namespace) -> int:
    t = _table(args)
    if args.archived:
        archived = t.archived_timeline
        # Version 8 archives record the completion time where version 6 kept the file's mtime.
        when_col = "completed at" if t.config.table_version >= 8 else "state transition time"
        out = _grid("archived timeline", ("instant", "action", "state", when_col), ("instant", when_col))
        for inst in archived.instants:
            when = archived.state_transition_time(inst.requested_time) if inst.is_completed else None
            out.add_row(inst.requested_time, inst.action.value, inst.state.name, when or "")
        console.print(out)
        return 0
    timeline = Timeline.load(t.storage, t.config)
    v8 = t.config.table_version >= 8
    # Version 6 records no completion time: as Hudi 0.14 (and its archiver) does, the
    # modification time of the instant's latest state file, in UTC.
    when_col = "completed at" if v8 else "state transition time (UTC)"
    out = _grid("timeline", ("instant", "action", "state", when_col), ("instant", when_col))
    modified = {} if v8 else _modification_times(t, timeline.dir)
    for inst in timeline.instants:
        at = inst.completion_time if v8 else modified.get(inst.file_name(timeline.layout_version))
        out.add_row(inst.requested_time, inst.action.value, inst.state.name, at or "")
    console.print(out)
    return 0


def _modification_times(t: shoal.Table, directory: str) -> dict[str, str]:
    """File name -> modification time as an instant time (UTC) of the files in ``directory``
    (relative to the table): one listing, not a request per instant on an object store."""
    import datetime as dt

    import pyarrow.fs as pafs

    from shoal.timeline.instant_time import format_instant

    selector = pafs.FileSelector(t.storage.full_path(directory), allow_not_found=True)
    return {
        info.base_name: format_instant(info.mtime.astimezone(dt.timezone.utc))
        for info in t.storage.fs.get_file_info(selector)
        if info.type == pafs.FileType.File and info.mtime is not None
    }


def _archive(args: argparse.Namespace) -> int:
    t = _table(args)
    result = t.archive()
    if result.recovered_merge:
        console.print(f"archive merge left by a crash: {result.recovered_merge}")
    if not result.archived:
        console.print("nothing to archive")
    for inst in result.archived:
        console.print(f"archived {inst.requested_time} {inst.action.value}")
    for path in result.archive_files:
        console.print(f"wrote {path}")
    if result.merged_file:
        console.print(f"merged small archive files into {result.merged_file}")
    return 0


def _files(args: argparse.Namespace) -> int:
    t = _table(args)
    columns = ("partition", "file id", "base instant", "base file bytes", "log files", "log bytes")
    out = _grid("latest file slices", columns, ("base instant",))
    for s in t.file_slices(as_of=args.as_of):
        out.add_row(
            s.partition_path or "/",
            s.file_id,
            s.base_instant,
            str(s.base_file.size) if s.base_file else "-",
            str(len(s.log_files)),
            str(sum(lf.size for lf in s.log_files)),
        )
    console.print(out)
    return 0


def _columns(text: str | None) -> list[str] | None:
    """``--columns a, b``: the names, without the spaces around them; None for every column."""
    if text is None:
        return None
    names = [c.strip() for c in text.split(",")]
    if not any(names) or not all(names):
        raise InvalidArgumentError(f"--columns takes comma-separated column names, got {text!r}")
    return names


def _show(args: argparse.Namespace) -> int:
    t = _table(args)
    filters = (
        where_filters(args.where, args.key, t.schema(), _key_field(t, args.key))
        if args.where or args.key
        else None
    )
    data = t.read(
        columns=_columns(args.columns), filters=filters, as_of=args.as_of, query_type=args.query_type
    )
    shown = min(args.limit, data.num_rows)
    console.print(f"{data.num_rows} rows" + (f" (first {shown} shown)" if 0 < shown < data.num_rows else ""))
    if args.limit == 0:
        return 0
    out = _grid(None, data.column_names)
    for row in data.slice(0, args.limit).to_pylist():
        out.add_row(*("" if v is None else str(v) for v in row.values()))
    console.print(out)
    return 0


def _key_field(t: shoal.Table, keys: Sequence[str]) -> str | None:
    """The field ``--key`` values are values of, for a table that stores no record keys
    (``hoodie.populate.meta.fields=false``); None for a table that stores them."""
    if not keys or t.config.populate_meta_fields:
        return None
    fields = t.keygen.record_key_fields
    if len(fields) != 1:
        raise InvalidArgumentError(
            "--key: this table stores no _hoodie_record_key (hoodie.populate.meta.fields=false) and its "
            f"record key has several fields ({', '.join(fields)}): use --where on them"
        )
    return fields[0]


def _rollback(args: argparse.Namespace) -> int:
    t = _table(args)
    instant = t.rollback(args.instant)
    undone = _undone(t, Action.ROLLBACK, instant)
    console.print(f"rolled back {', '.join(undone) or 'the last commit'} as rollback instant {instant}")
    return 0


def _done_metadata(read: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """The metadata of a service that completed, to report what it did; empty when it cannot
    be read: the service is done, and its success must not be reported as a failure."""
    try:
        return read()
    except (ShoalError, OSError):
        return {}


def _undone(t: shoal.Table, action: Action, instant_time: str) -> list[str]:
    """What the completed rollback or restore at ``instant_time`` undid, from its metadata (a
    retried rollback finishes an interrupted one, which may not be the commit asked for)."""
    from shoal.services.restore import undone_instants

    try:
        undone = undone_instants(
            Timeline.load(t.storage, t.config), Instant(instant_time, action, State.COMPLETED)
        )
    except (ShoalError, OSError):
        return []  # the service is done: its success must not be reported as a failure
    return [f"{a} {time}" if a else time for a, time in undone]


def _compact(args: argparse.Namespace) -> int:
    t = _table(args)
    if args.if_due and args.run:
        raise InvalidArgumentError("--if-due applies to scheduling, not to --run of a planned compaction")
    if args.run:
        metadata = t.run_compaction(args.run)
        console.print(f"compaction {args.run} completed: {len(metadata.write_stats())} file groups")
        return 0
    if args.schedule:
        instant = t.schedule_compaction(force=not args.if_due)
        console.print(f"scheduled compaction {instant}" if instant else "nothing to compact")
        return 0
    pending = t.pending_compactions()
    try:
        done = t.compact(force=not args.if_due)
    except (ShoalError, OSError, pa.ArrowException):
        # Pending compactions run before a new one is scheduled: say which of them completed
        # before scheduling failed, or the operator would think nothing happened.
        still = set(t.pending_compactions())
        for instant in pending:
            if instant not in still:
                console.print(f"compaction {instant} completed")
        raise
    if not done:
        console.print("nothing to compact")
    for instant in done:
        console.print(f"compaction {instant} completed")
    return 0


# The retention each cleaner policy reads, and the flag that sets it.
_RETAIN_FLAGS = {
    "KEEP_LATEST_COMMITS": "retain_commits",
    "KEEP_LATEST_FILE_VERSIONS": "retain_versions",
    "KEEP_LATEST_BY_HOURS": "retain_hours",
}


def _check(args: argparse.Namespace) -> int:
    from shoal.services.check import check_table

    t = shoal.Table(args.path)
    report = check_table(t.storage, t.config, deep=args.deep)
    if report.problems:
        grid = _grid("problems", ("severity", "kind", "path", "detail"))
        for p in report.problems:
            grid.add_row("error" if p.is_error else "warning", p.kind, p.path, p.detail)
        console.print(grid)
    errors, warnings = len(report.errors), len(report.problems) - len(report.errors)
    checked = f"checked {report.files} files of {report.file_groups} file groups"
    console.print(f"{checked}: {errors} errors, {warnings} warnings")
    return 1 if errors else 0


def _clean(args: argparse.Namespace) -> int:
    from shoal.config.write_config import CLEANER_POLICY
    from shoal.services.clean import clean_metadata

    t = _table(args)
    # A retention the policy in force does not read would be ignored: the clean would keep
    # something else than asked (--retain-versions 1 under KEEP_LATEST_COMMITS keeps 10 commits).
    configured = str(t.write_config.get(CLEANER_POLICY))
    if args.policy and CLEANER_POLICY in _options(args) and args.policy != configured:
        raise InvalidArgumentError(f"--policy {args.policy} contradicts -o {CLEANER_POLICY}={configured}")
    policy = args.policy or configured
    wanted = _RETAIN_FLAGS.get(policy)
    for flag in _RETAIN_FLAGS.values():
        if wanted is not None and flag != wanted and getattr(args, flag) is not None:
            raise InvalidArgumentError(
                f"--{flag.replace('_', '-')} does not apply to the cleaner policy {policy}, which keeps "
                f"what --{wanted.replace('_', '-')} says (choose the policy with --policy)"
            )
    options = {}
    if args.policy:
        options["hoodie.cleaner.policy"] = args.policy
    if args.retain_commits is not None:
        options["hoodie.cleaner.commits.retained"] = str(args.retain_commits)
    if args.retain_versions is not None:
        options["hoodie.cleaner.fileversions.retained"] = str(args.retain_versions)
    if args.retain_hours is not None:
        options["hoodie.cleaner.hours.retained"] = str(args.retain_hours)
    done = t.clean(options=options)
    if not done:
        console.print("nothing to clean")
    timeline = Timeline.load(t.storage, t.config)
    for instant in done:
        # What Hudi's `cleans show` reports: files deleted, the earliest commit retained.
        meta = _done_metadata(lambda: clean_metadata(timeline, instant))  # noqa: B023 (called at once)
        deleted, retained = meta.get("totalFilesDeleted"), meta.get("earliestCommitToRetain")
        console.print(
            f"clean {instant} completed"
            + (f": {deleted} files deleted" if deleted is not None else "")
            + (f", earliest commit retained {retained}" if retained else "")
        )
    return 0


def _savepoint(args: argparse.Namespace) -> int:
    t = _table(args)
    if args.delete:
        if args.instant is None:
            raise InvalidArgumentError("--delete needs the instant of the savepoint to delete")
        if args.comment:
            raise InvalidArgumentError("--comment applies to a new savepoint, not to --delete")
        t.delete_savepoint(args.instant)
        console.print(f"deleted savepoint {args.instant}")
        return 0
    instant = t.savepoint(args.instant, comment=args.comment)
    console.print(f"savepointed {instant}")
    return 0


def _savepoints(args: argparse.Namespace) -> int:
    """The savepoints with who made them, when and why (Hudi's ``savepoints show`` lists the
    times alone)."""
    import datetime as dt

    from shoal.services.savepoint import savepoint_metadata

    t = _table(args)
    instants = t.savepoints()
    if not instants:
        console.print("no savepoints")
        return 0
    timeline = Timeline.load(t.storage, t.config)
    out = _grid("savepoints", ("instant", "savepointed at (UTC)", "by", "comment"), ("instant",))
    for instant in instants:
        meta = savepoint_metadata(timeline, instant)
        millis = meta.get("savepointedAt")
        at = dt.datetime.fromtimestamp(millis / 1000, dt.timezone.utc) if isinstance(millis, int) else None
        out.add_row(
            instant,
            at.strftime("%Y-%m-%d %H:%M:%S") if at else "",
            meta.get("savepointedBy") or "",
            meta.get("comments") or "",
        )
    console.print(out)
    return 0


def _delete_partition(args: argparse.Namespace) -> int:
    t = _table(args)
    if not all(p.strip() for p in args.partitions):
        # "" is the one partition of a non-partitioned table: an unset shell variable
        # ("$PARTITION") would delete every row.
        raise InvalidArgumentError(
            "an empty partition path is refused: name the partitions as stored, e.g. city=sf"
        )
    instant = t.delete_partitions(args.partitions)
    console.print(
        f"deleted {', '.join(args.partitions)} in replace commit {instant}; "
        "the cleaner removes their files once they fall out of retention"
    )
    return 0


def _restore(args: argparse.Namespace) -> int:
    t = _table(args)
    instant = t.restore(args.instant)
    undone = _undone(t, Action.RESTORE, instant)
    console.print(
        f"restored to savepoint {args.instant} as restore instant {instant}; "
        + (f"rolled back {', '.join(undone)}" if undone else "nothing after the savepoint to roll back")
    )
    return 0


def _demo(args: argparse.Namespace) -> int:
    from shoal.demo import main as demo_main

    argv = ["--engine", args.engine, "--batches", str(args.batches)]
    return demo_main(argv + (["--path", args.path] if args.path else []))


def _commit(args: argparse.Namespace) -> int:
    from shoal.errors import InstantNotFoundError
    from shoal.timeline.archived import ArchivedTimeline

    t = _table(args)
    timeline = Timeline.load(t.storage, t.config)
    source: Timeline | ArchivedTimeline = timeline
    where = ""
    if args.instant is None:
        inst = timeline.last_completed_data_instant()
        if inst is None:
            raise InstantNotFoundError("the table has no completed commit")
    else:
        inst = timeline.get(args.instant)
        if inst is None:
            # Hudi's CLI shows archived commits too (commits showarchived).
            source, where = t.archived_timeline, ", archived"
            inst = source.get(args.instant)
        if inst is None:
            raise InstantNotFoundError(f"no instant {args.instant} on the active or the archived timeline")
        if not inst.is_completed:
            raise InstantNotFoundError(
                f"{inst.action.value} {args.instant} is {inst.state.name.lower()}: no completed commit yet"
            )
        if inst.action not in DATA_ACTIONS:
            # Its metadata is a clean's, rollback's, ... plan: not files written.
            raise InvalidArgumentError(
                f"{args.instant} is a {inst.action.value} instant, not a commit: `commit` shows what a "
                "commit, delta commit, replace commit or compaction wrote"
            )
    metadata = source.commit_metadata(inst)
    title = f"{inst.action.value} {inst.requested_time} ({metadata.operation_type or '-'}{where})"
    out = RichTable(title=title)
    # A file's name starts with its file group id; long names wrap rather than lose characters.
    out.add_column("partition", overflow="fold")
    out.add_column("file", overflow="fold")
    for col in ("writes", "updates", "inserts", "deletes", "errors", "bytes"):
        out.add_column(col, justify="right", overflow="fold")
    for s in metadata.write_stats():
        name = s.path.rsplit("/", 1)[-1] if s.path else s.fileId
        counts = (
            s.numWrites,
            s.numUpdateWrites,
            s.numInserts,
            s.numDeletes,
            s.totalWriteErrors,
            s.totalWriteBytes,
        )
        out.add_row(s.partitionPath or "", name, *(f"{c:,}" for c in counts))
    console.print(out)
    # A replace commit (overwrite, partition delete, clustering) also retires whole file groups.
    for partition, ids in sorted(metadata.replaced_file_ids().items()):
        console.print(
            f"replaced in {partition or '(table root)'}: {len(ids)} file group(s): {', '.join(sorted(ids))}"
        )
    # The schema is the table's, shown by `info`; the rest is what writers recorded (checkpoints).
    extra = {k: v for k, v in (metadata.extra_metadata or {}).items() if k != "schema"}
    for key, value in sorted(extra.items()):
        console.print(f"{key} = {value}")
    return 0


def _size(n: int) -> str:
    """Bytes for people: 512 B, 14.2 KiB, 118.0 MiB."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def _stats(args: argparse.Namespace) -> int:
    from shoal.cli.stats import commit_writes, partition_files

    t = _table(args)
    # Slices first: a bad --as-of is reported before anything is printed.
    partitions = partition_files(t.file_slices(as_of=args.as_of))
    writes = RichTable(title="records written per commit (WA: write amplification, written / updated)")
    # Narrow consoles wrap values instead of cutting them short; instant times stay whole.
    writes.add_column("instant", no_wrap=True, min_width=17)
    for col in ("action", "operation"):
        writes.add_column(col, overflow="fold")
    for col in ("written", "updated", "inserts", "deletes", "bytes", "WA"):
        writes.add_column(col, justify="right", overflow="fold")
    rows = commit_writes(Timeline.load(t.storage, t.config))
    for w in rows:
        amp = f"{w.amplification:.2f}" if w.amplification is not None else "-"
        counts = (w.written, w.updated, w.inserted, w.deleted)
        writes.add_row(w.instant, w.action, w.operation, *(f"{c:,}" for c in counts), _size(w.bytes), amp)
    written, updated = sum(w.written for w in rows), sum(w.updated for w in rows)
    writes.add_row(
        "all",
        "",
        "",
        f"{written:,}",
        f"{updated:,}",
        f"{sum(w.inserted for w in rows):,}",
        f"{sum(w.deleted for w in rows):,}",
        _size(sum(w.bytes for w in rows)),
        f"{written / updated:.2f}" if updated else "-",
    )
    console.print(writes)
    sizes = RichTable(title="latest file slices: base file bytes, and logs awaiting compaction")
    sizes.add_column("partition", overflow="fold")
    for col in ("files", "min", "median", "mean", "p95", "max", "logs", "log bytes"):
        sizes.add_column(col, justify="right", overflow="fold")
    for p in partitions:
        n = len(p.base_sizes)
        mean = sum(p.base_sizes) // n if n else 0
        stats = (n, p.percentile(0), p.percentile(50), mean, p.percentile(95), p.percentile(100))
        name = "all" if p.partition is None else p.partition or "/"
        sizes.add_row(name, f"{n:,}", *(_size(v) for v in stats[1:]), f"{p.log_files:,}", _size(p.log_bytes))
    console.print(sizes)
    return 0


def _count(text: str) -> int:
    """A non-negative integer argument."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}")
    return value


def _positive(text: str) -> int:
    """A positive integer argument."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


PATH_HELP = "the table's base path (the directory holding .hoodie/)"
INSTANT_HELP = "an instant time, yyyyMMddHHmmssSSS, as `shoal timeline` lists them"
AS_OF_HELP = "as of this instant time (yyyyMMddHHmmssSSS; or yyyy-MM-dd HH:mm:ss): time travel"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="shoal", description="Inspect and operate Hudi tables.")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "-o",
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a write option (repeatable), such as hoodie.write.concurrency.mode="
        "OPTIMISTIC_CONCURRENCY_CONTROL when other writers run beside this command",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, summary: str, with_options: bool = True) -> argparse.ArgumentParser:
        return subparsers.add_parser(
            name, parents=[common] if with_options else [], help=summary, description=summary
        )

    p = command("info", "table configuration and state: pending writes with their heartbeats, the lock")
    p.add_argument("path", help=PATH_HELP)
    p.set_defaults(fn=_info)
    p = command("timeline", "every instant on the active timeline, pending ones included")
    p.add_argument("path", help=PATH_HELP)
    p.add_argument("--archived", action="store_true", help="the archived timeline instead")
    p.set_defaults(fn=_timeline)
    p = command("commit", "the files a commit wrote and its extra metadata (default: the latest)")
    p.add_argument("path", help=PATH_HELP)
    p.add_argument(
        "--instant", default=None, help=INSTANT_HELP + "; a commit on the active or the archived timeline"
    )
    p.set_defaults(fn=_commit)
    p = command("files", "latest file slice of every file group: base file and log files")
    p.add_argument("path", help=PATH_HELP)
    p.add_argument("--as-of", default=None, help=AS_OF_HELP)
    p.set_defaults(fn=_files)
    p = command("stats", "records written per commit (write amplification) and file sizes")
    p.add_argument("path", help=PATH_HELP)
    p.add_argument("--as-of", default=None, help="the file slices as of this instant time")
    p.set_defaults(fn=_stats)
    p = command("show", "print rows (the row count, then the first --limit rows)")
    p.add_argument("path", help=PATH_HELP)
    p.add_argument("--columns", default=None, help="comma-separated columns (default: all)")
    p.add_argument(
        "--limit", type=_count, default=20, help="rows to print (default 20; 0 for the count alone)"
    )
    p.add_argument("--as-of", default=None, help=AS_OF_HELP)
    p.add_argument(
        "--query-type",
        default="snapshot",
        choices=["snapshot", "read_optimized"],
        help="snapshot (default: logs merged) or read_optimized (base files only)",
    )
    p.add_argument(
        "--where",
        action="append",
        default=[],
        metavar="CONDITION",
        help="a row filter (repeatable, ANDed): COLUMN OP VALUE with OP one of = != < <= > >=, or "
        "COLUMN in V1,V2; filters on partition fields prune partitions, on the record key files",
    )
    p.add_argument(
        "--key",
        action="append",
        default=[],
        help="a record key (repeatable: any of them), looked up in the files whose footers may hold it",
    )
    p.set_defaults(fn=_show)
    p = command(
        "check", "check the table's files against its timeline: lost, cut-off or unrecorded files", False
    )
    p.add_argument("path", help=PATH_HELP)
    p.add_argument("--deep", action="store_true", help="read every latest file's footer or blocks too")
    p.set_defaults(fn=_check)
    p = command("archive", "archive old instants (hoodie.keep.min/max.commits)")
    p.add_argument("path", help=PATH_HELP)
    p.set_defaults(fn=_archive)
    p = command("rollback", "roll back the latest commit")
    p.add_argument("path", help=PATH_HELP)
    p.add_argument("--instant", default=None, help="the commit to roll back: it must be the latest")
    p.set_defaults(fn=_rollback)
    p = command("compact", "compact a merge-on-read table: run pending compactions, schedule and run one")
    p.add_argument("path", help=PATH_HELP)
    what = p.add_mutually_exclusive_group()
    what.add_argument("--schedule", action="store_true", help="only save a compaction plan")
    what.add_argument("--run", metavar="INSTANT", help="run the pending compaction INSTANT")
    p.add_argument(
        "--if-due", action="store_true", help="only when hoodie.compact.inline.trigger.strategy says so"
    )
    p.set_defaults(fn=_compact)
    p = command("clean", "remove file slices the cleaner policy no longer retains")
    p.add_argument("path", help=PATH_HELP)
    p.add_argument(
        "--policy",
        default=None,
        choices=list(_RETAIN_FLAGS),
        help="hoodie.cleaner.policy (default KEEP_LATEST_COMMITS)",
    )
    p.add_argument(
        "--retain-commits",
        type=int,
        default=None,
        metavar="N",
        help="KEEP_LATEST_COMMITS: keep what reads as of the latest N commits need "
        "(hoodie.cleaner.commits.retained, default 10)",
    )
    p.add_argument(
        "--retain-versions",
        type=int,
        default=None,
        metavar="N",
        help="KEEP_LATEST_FILE_VERSIONS: keep N slices per file group "
        "(hoodie.cleaner.fileversions.retained, default 3)",
    )
    p.add_argument(
        "--retain-hours",
        type=int,
        default=None,
        metavar="N",
        help="KEEP_LATEST_BY_HOURS: keep what the commits of the last N hours need "
        "(hoodie.cleaner.hours.retained, default 24)",
    )
    p.set_defaults(fn=_clean)
    p = command("savepoint", "savepoint a commit (default: the latest), or delete a savepoint")
    p.add_argument("path", help=PATH_HELP)
    p.add_argument(
        "instant", nargs="?", default=None, help="the commit to savepoint (or the savepoint to delete)"
    )
    p.add_argument("--comment", default="", help="a comment stored in the savepoint")
    p.add_argument("--delete", action="store_true", help="delete the savepoint at the instant")
    p.set_defaults(fn=_savepoint)
    p = command("savepoints", "list the savepoints")
    p.add_argument("path", help=PATH_HELP)
    p.set_defaults(fn=_savepoints)
    p = command("delete-partition", "delete whole partitions (a replace commit)")
    p.add_argument("path", help=PATH_HELP)
    p.add_argument(
        "partitions", nargs="+", help="partition paths as stored, e.g. city=sf; * matches any characters"
    )
    p.set_defaults(fn=_delete_partition)
    p = command("restore", "roll the table back to a savepoint: every later commit is rolled back")
    p.add_argument("path", help=PATH_HELP)
    p.add_argument("instant", help="the savepoint's instant time, as `shoal savepoints` lists them")
    p.set_defaults(fn=_restore)
    # The demo writes tables of its own: write options for a table do not apply.
    p = command("demo", "run the CDC demo pipeline (python -m shoal.demo)", with_options=False)
    p.add_argument("path", nargs="?", default=None, help="where to put the tables (default: a temp dir)")
    p.add_argument(
        "--engine", choices=["both", "spark", "embedded"], default="embedded", help="default: embedded"
    )
    p.add_argument("--batches", type=_positive, default=6, help="micro-batches of changes (default 6)")
    p.set_defaults(fn=_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``shoal`` console script: 0 on success, 2 for a refused command or a
    table shoal cannot use (a typed error), 1 when storage fails or a file cannot be read, 130
    on Ctrl-C; a bad argument raises argparse's SystemExit(2). Errors are one line on
    stderr."""
    args = build_parser().parse_args(argv)
    with _page_width():
        try:
            return int(args.fn(args))
        except ShoalError as e:
            _error(e)
            return 2
        except (OSError, pa.ArrowException) as e:
            # A damaged or vanished file, a storage failure: one line for the operator, not a traceback.
            _error(e)
            return 1
        except KeyboardInterrupt:
            # Ctrl-C: what was committed stays committed, an instant left pending is rolled back
            # by the next write; the shell's code for SIGINT, and no traceback.
            errors.print("interrupted", highlight=False)
            return 130


# How wide tables may grow when the output goes to a pipe or a file rather than a terminal.
PIPED_WIDTH = 4096


@contextmanager
def _page_width() -> Iterator[None]:
    """Output to a pipe or a file (no terminal, no ``COLUMNS``) is not squeezed into the 80
    columns rich assumes there: a table keeps each row on one line, for grep and scripts."""
    if console.is_terminal or os.environ.get("COLUMNS"):
        yield
        return
    saved = console.width
    console.width = PIPED_WIDTH
    try:
        yield
    finally:
        console.width = saved


def _error(e: BaseException) -> None:
    """One line, however long the message and however narrow the terminal: a log line a
    script can grep, never a message cut into pieces."""
    message = " ".join(str(e).split())
    errors.print(Text.assemble((type(e).__name__, "red"), f": {message}"), highlight=False, soft_wrap=True)


if __name__ == "__main__":
    sys.exit(main())
