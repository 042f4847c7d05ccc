"""``shoal <command> <table path>``: table info, timeline (active or archived), a commit's files and
extra metadata, file slices, write and file size statistics, rows, and the table services
(compact, clean, archive, rollback, savepoint, restore); ``shoal demo``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

import shoal
from shoal.config.write_config import FILE_SYSTEM_LOCK_PATH
from shoal.errors import InvalidOptionError, ShoalError
from shoal.timeline.file_lock import FileLock
from shoal.timeline.heartbeat import heartbeat_age
from shoal.timeline.timeline import DATA_ACTIONS, Timeline

# Without markup: table names, partition paths, instants and row values are printed as they
# are, never read as rich markup (a value such as "[/x]" would raise, "[red]a" would print "a").
console = Console(markup=False)


def _table(args: argparse.Namespace) -> shoal.Table:
    """The table at ``args.path``, with the write options given by ``--option``."""
    options: dict[str, str] = {}
    for item in getattr(args, "option", None) or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InvalidOptionError(f"--option takes KEY=VALUE, got {item!r}")
        options[key.strip()] = value.strip()
    return shoal.Table(args.path, options=options)


def _info(args: argparse.Namespace) -> int:
    t = _table(args)
    cfg = t.config
    grid = RichTable(show_header=False, title=f"table {cfg.table_name}")
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
    age of its heartbeat, and who holds the table's lock."""
    timeline = Timeline.load(t.storage, t.config)
    rows = []
    for inst in timeline.pending():
        if inst.action not in DATA_ACTIONS:
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
        out = RichTable(title="archived timeline")
        # Version 8 archives record the completion time where version 6 kept the file's mtime.
        when_col = "completed at" if t.config.table_version >= 8 else "state transition time"
        for col in ("instant", "action", "state", when_col):
            out.add_column(col)
        for inst in archived.instants:
            when = archived.state_transition_time(inst.requested_time) if inst.is_completed else None
            out.add_row(inst.requested_time, inst.action.value, inst.state.name, when or "")
        console.print(out)
        return 0
    out = RichTable(title="timeline")
    for col in ("instant", "action", "state", "completed at"):
        out.add_column(col)
    for inst in t.instants():
        out.add_row(inst.requested_time, inst.action.value, inst.state.name, inst.completion_time or "")
    console.print(out)
    return 0


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
    out = RichTable(title="latest file slices")
    for col in ("partition", "file id", "base instant", "base file bytes", "log files"):
        out.add_column(col)
    for s in t.file_slices(as_of=args.as_of):
        out.add_row(
            s.partition_path or "/",
            s.file_id,
            s.base_instant,
            str(s.base_file.size) if s.base_file else "-",
            str(len(s.log_files)),
        )
    console.print(out)
    return 0


def _show(args: argparse.Namespace) -> int:
    t = _table(args)
    columns = args.columns.split(",") if args.columns else None
    data = t.read(columns=columns, as_of=args.as_of, query_type=args.query_type)
    console.print(f"{data.num_rows} rows")
    out = RichTable()
    for name in data.column_names:
        out.add_column(name)
    for row in data.slice(0, args.limit).to_pylist():
        out.add_row(*("" if v is None else str(v) for v in row.values()))
    console.print(out)
    return 0


def _rollback(args: argparse.Namespace) -> int:
    t = _table(args)
    instant = t.rollback(args.instant)
    console.print(f"rolled back the last commit as rollback instant {instant}")
    return 0


def _compact(args: argparse.Namespace) -> int:
    t = _table(args)
    if args.run:
        metadata = t.run_compaction(args.run)
        console.print(f"compaction {args.run} completed: {len(metadata.write_stats())} file groups")
        return 0
    if args.schedule:
        instant = t.schedule_compaction(force=not args.if_due)
        console.print(f"scheduled compaction {instant}" if instant else "nothing to compact")
        return 0
    done = t.compact(force=not args.if_due)
    if not done:
        console.print("nothing to compact")
    for instant in done:
        console.print(f"compaction {instant} completed")
    return 0


def _clean(args: argparse.Namespace) -> int:
    t = _table(args)
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
    for instant in done:
        console.print(f"clean {instant} completed")
    return 0


def _savepoint(args: argparse.Namespace) -> int:
    t = _table(args)
    if args.delete:
        if args.instant is None:
            console.print("--delete needs the savepoint instant", style="red")
            return 2
        t.delete_savepoint(args.instant)
        console.print(f"deleted savepoint {args.instant}")
        return 0
    instant = t.savepoint(args.instant, comment=args.comment)
    console.print(f"savepointed {instant}")
    return 0


def _savepoints(args: argparse.Namespace) -> int:
    for instant in _table(args).savepoints():
        console.print(instant)
    return 0


def _delete_partition(args: argparse.Namespace) -> int:
    t = _table(args)
    instant = t.delete_partitions(args.partitions)
    console.print(
        f"deleted {', '.join(args.partitions)} in replace commit {instant}; "
        "the cleaner removes their files once they fall out of retention"
    )
    return 0


def _restore(args: argparse.Namespace) -> int:
    t = _table(args)
    instant = t.restore(args.instant)
    console.print(f"restored to savepoint {args.instant} as restore instant {instant}")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from shoal.demo import main as demo_main

    argv = ["--engine", args.engine, "--batches", str(args.batches)]
    return demo_main(argv + (["--path", args.path] if args.path else []))


def _commit(args: argparse.Namespace) -> int:
    from shoal.errors import InstantNotFoundError
    from shoal.timeline.timeline import Timeline

    t = _table(args)
    timeline = Timeline.load(t.storage, t.config)
    if args.instant is None:
        inst = timeline.last_completed_data_instant()
        if inst is None:
            raise InstantNotFoundError("the table has no completed commit")
    else:
        inst = timeline.get(args.instant)
        if inst is None or not inst.is_completed:
            raise InstantNotFoundError(f"no completed instant {args.instant} on the active timeline")
    metadata = timeline.commit_metadata(inst)
    out = RichTable(title=f"{inst.action.value} {inst.requested_time} ({metadata.operation_type or '-'})")
    # A file's name starts with its file group id; long names wrap rather than lose characters.
    out.add_column("partition", overflow="fold")
    out.add_column("file", overflow="fold")
    for col in ("writes", "updates", "inserts", "deletes", "bytes"):
        out.add_column(col, justify="right")
    for s in metadata.write_stats():
        name = s.path.rsplit("/", 1)[-1] if s.path else s.fileId
        counts = (s.numWrites, s.numUpdateWrites, s.numInserts, s.numDeletes, s.totalWriteBytes)
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
    subparsers = parser.add_subparsers(dest="command", required=True)

    def command(name: str, **kwargs: Any) -> argparse.ArgumentParser:
        return subparsers.add_parser(name, parents=[common], **kwargs)

    p = command("info", help="table configuration and state")
    p.add_argument("path")
    p.set_defaults(fn=_info)
    p = command("timeline", help="every instant on the active timeline")
    p.add_argument("path")
    p.add_argument("--archived", action="store_true", help="the archived timeline instead")
    p.set_defaults(fn=_timeline)
    p = command("commit", help="the files a commit wrote and its extra metadata (default: the latest)")
    p.add_argument("path")
    p.add_argument("--instant", default=None)
    p.set_defaults(fn=_commit)
    p = command("files", help="latest file slice of every file group")
    p.add_argument("path")
    p.add_argument("--as-of", default=None)
    p.set_defaults(fn=_files)
    p = command("stats", help="records written per commit (write amplification) and file sizes")
    p.add_argument("path")
    p.add_argument("--as-of", default=None, help="the file slices as of this instant")
    p.set_defaults(fn=_stats)
    p = command("show", help="print rows")
    p.add_argument("path")
    p.add_argument("--columns", default=None, help="comma-separated columns")
    p.add_argument("--limit", type=_count, default=20, help="rows to print (default 20)")
    p.add_argument("--as-of", default=None)
    p.add_argument("--query-type", default="snapshot", choices=["snapshot", "read_optimized"])
    p.set_defaults(fn=_show)
    p = command("archive", help="archive old instants (hoodie.keep.min/max.commits)")
    p.add_argument("path")
    p.set_defaults(fn=_archive)
    p = command("rollback", help="roll back the latest commit")
    p.add_argument("path")
    p.add_argument("--instant", default=None, help="must be the latest commit")
    p.set_defaults(fn=_rollback)
    p = command("compact", help="compact a merge-on-read table (schedule and run)")
    p.add_argument("path")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--schedule", action="store_true", help="only save a compaction plan")
    what.add_argument("--run", metavar="INSTANT", help="run the pending compaction INSTANT")
    p.add_argument(
        "--if-due", action="store_true", help="only when hoodie.compact.inline.trigger.strategy says so"
    )
    p.set_defaults(fn=_compact)
    p = command("clean", help="remove file slices the cleaner policy no longer retains")
    p.add_argument("path")
    p.add_argument(
        "--policy",
        default=None,
        choices=["KEEP_LATEST_COMMITS", "KEEP_LATEST_FILE_VERSIONS", "KEEP_LATEST_BY_HOURS"],
    )
    p.add_argument("--retain-commits", type=int, default=None, help="hoodie.cleaner.commits.retained")
    p.add_argument("--retain-versions", type=int, default=None, help="hoodie.cleaner.fileversions.retained")
    p.add_argument("--retain-hours", type=int, default=None, help="hoodie.cleaner.hours.retained")
    p.set_defaults(fn=_clean)
    p = command("savepoint", help="savepoint a commit (default: the latest), or delete one")
    p.add_argument("path")
    p.add_argument("instant", nargs="?", default=None)
    p.add_argument("--comment", default="")
    p.add_argument("--delete", action="store_true", help="delete the savepoint at the instant")
    p.set_defaults(fn=_savepoint)
    p = command("savepoints", help="list the savepoints")
    p.add_argument("path")
    p.set_defaults(fn=_savepoints)
    p = command("delete-partition", help="delete whole partitions (a replace commit)")
    p.add_argument("path")
    p.add_argument(
        "partitions", nargs="+", help="partition paths as stored, e.g. city=sf; * matches any characters"
    )
    p.set_defaults(fn=_delete_partition)
    p = command("restore", help="roll the table back to a savepoint")
    p.add_argument("path")
    p.add_argument("instant")
    p.set_defaults(fn=_restore)
    p = command("demo", help="run the CDC demo pipeline (python -m shoal.demo)")
    p.add_argument("path", nargs="?", default=None, help="where to put the tables (default: a temp dir)")
    p.add_argument("--engine", choices=["both", "spark", "embedded"], default="embedded")
    p.add_argument("--batches", type=int, default=6)
    p.set_defaults(fn=_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``shoal`` console script: 0 on success, 2 for a refused command or a
    table shoal cannot use (a typed error), 1 when storage fails or a file cannot be read."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.fn(args))
    except ShoalError as e:
        _error(e)
        return 2
    except (OSError, pa.ArrowException) as e:
        # A damaged or vanished file, a storage failure: one line for the operator, not a traceback.
        _error(e)
        return 1


def _error(e: BaseException) -> None:
    console.print(Text.assemble((type(e).__name__, "red"), f": {e}"), highlight=False)


if __name__ == "__main__":
    sys.exit(main())
