"""Table services and the CLI under what a production table meets: a clean while a compaction is
pending on file groups a replace commit retired, time travel once old cleans were archived,
rollbacks and savepoints interrupted by a crash, and CLI errors that are not shoal's."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest

import shoal
from shoal.cli.main import main as cli_main
from shoal.errors import CleanedInstantError, InstantNotFoundError
from shoal.timeline.instant import Action
from shoal.timeline.timeline import Timeline

from .hudi_oracle import hudi_rs_read, rows_by

COLUMNS = ["id", "part", "v"]
QUIET = {"hoodie.clean.automatic": "false", "hoodie.archive.automatic": "false"}


def _table(path: Path, table_type: str = "COPY_ON_WRITE", **options: str) -> shoal.Table:
    return shoal.Table.create(
        str(path),
        name="t",
        table_type=table_type,
        record_key="id",
        partition_by="part",
        ordering_field="ts",
        options={**QUIET, **options},
    )


def _rows(*rows: tuple[int, str, int]) -> pa.Table:
    return pa.Table.from_pylist([{"id": i, "part": p, "ts": v, "v": v} for i, p, v in rows])


def _read(t: shoal.Table, as_of: str | None = None) -> list[dict]:
    return rows_by(t.read(as_of=as_of), COLUMNS, ["id"])


def _expected(*rows: tuple[int, str, int]) -> list[dict]:
    return sorted(({"id": i, "part": p, "v": v} for i, p, v in rows), key=lambda r: r["id"])


def _timeline_files(t: shoal.Table) -> list[str]:
    return sorted(os.listdir(Path(t.path) / ".hoodie"))


def _data_files(t: shoal.Table) -> set[str]:
    root = Path(t.path)
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and ".hoodie" not in p.parts}


# ---- clean ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "clean_options",
    [
        {"hoodie.cleaner.commits.retained": "1"},
        {"hoodie.cleaner.policy": "KEEP_LATEST_FILE_VERSIONS", "hoodie.cleaner.fileversions.retained": "1"},
    ],
)
def test_clean_keeps_a_pending_compactions_slices_in_file_groups_a_replace_retired(tmp_path, clean_options):
    """A compaction planned before an overwrite retired its file groups still reads their base
    and log files: the cleaner must leave them until the compaction has run, as it does for
    file groups that were not replaced."""
    t = _table(tmp_path / "t", "MERGE_ON_READ")
    t.insert(_rows((1, "a", 1), (2, "a", 1)))
    t.upsert(_rows((1, "a", 2)))
    compaction = t.schedule_compaction()
    assert compaction is not None
    t.insert_overwrite_table(_rows((3, "b", 3)))
    t.upsert(_rows((4, "b", 4)))

    t.clean(options=clean_options)

    assert t.compact() == [compaction]
    assert _read(t) == _expected((3, "b", 3), (4, "b", 4))
    assert rows_by(hudi_rs_read(t.path), COLUMNS, ["id"]) == _read(t)
    # Once the compaction completed, its output in the retired file group goes too.
    t.upsert(_rows((4, "b", 5)))
    t.clean(options=clean_options)
    assert not any(name.startswith("a/") and not name.endswith("_metadata") for name in _data_files(t))


def test_time_travel_is_refused_once_the_clean_that_removed_its_slices_was_archived(tmp_path):
    """Cleans are archived by their own count while a savepoint keeps older commits active: a read
    as of such a commit still needs what an archived clean removed, and must not return the rows
    of whatever slices are left."""
    t = _table(
        tmp_path / "t",
        **{
            "hoodie.cleaner.commits.retained": "1",
            "hoodie.keep.min.commits": "2",
            "hoodie.keep.max.commits": "3",
        },
    )
    pinned = t.insert(_rows((0, "z", 0)))
    t.savepoint(pinned)  # archival of commits stops here
    first = t.insert(_rows((1, "a", 1)))
    for v in range(2, 7):
        t.upsert(_rows((1, "a", v)))
        t.clean()
    with pytest.raises(CleanedInstantError):
        t.read(as_of=first)
    archived = t.archive().archived
    assert any(i.action == Action.CLEAN for i in archived)
    assert not any(i.action == Action.COMMIT for i in archived)

    with pytest.raises(CleanedInstantError):
        t.read(as_of=first)
    with pytest.raises(CleanedInstantError):
        t.savepoint(first)
    assert _read(t, as_of=pinned) == _expected((0, "z", 0))
    assert _read(t) == _expected((0, "z", 0), (1, "a", 6))


# ---- rollback ------------------------------------------------------------------------------


def _crash_when_completing(monkeypatch: pytest.MonkeyPatch, action: Action) -> None:
    """The process dies as it would publish the completed file of an ``action`` instant."""
    real = Timeline.complete

    def complete(self: Timeline, instant, content):
        if instant.action == action:
            raise OSError("killed")
        return real(self, instant, content)

    monkeypatch.setattr(Timeline, "complete", complete)


def _command_blocks(t: shoal.Table) -> int:
    from shoal import _native

    root = Path(t.path)
    return sum(
        b.block_type == "COMMAND_BLOCK" for p in root.rglob(".*.log.*") for b in _native.read_log_file(str(p))
    )


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_rollback_interrupted_by_a_crash_is_resumed_not_left_pending(tmp_path, monkeypatch, table_type):
    t = _table(tmp_path / "t", table_type)
    t.insert(_rows((1, "a", 1), (2, "b", 1)))
    t.upsert(_rows((1, "a", 2)))
    last = t.upsert(_rows((1, "a", 3), (3, "b", 3)))  # on MOR, appends to the log the previous one created
    _crash_when_completing(monkeypatch, Action.ROLLBACK)
    with pytest.raises(OSError):
        t.rollback()
    monkeypatch.undo()
    (crashed,) = [i for i in Timeline.load(t.storage, t.config).pending() if i.action == Action.ROLLBACK]

    assert t.rollback() == crashed.requested_time

    timeline = Timeline.load(t.storage, t.config)
    assert timeline.pending() == []
    assert timeline.get(last) is None
    assert _read(t) == _expected((1, "a", 2), (2, "b", 1))
    assert rows_by(hudi_rs_read(t.path), COLUMNS, ["id"]) == _read(t)
    # The resumed rollback neutralised the append once, not once per attempt.
    assert _command_blocks(t) == (1 if table_type == "MERGE_ON_READ" else 0)


# ---- savepoints ----------------------------------------------------------------------------


def test_a_savepoint_interrupted_by_a_crash_can_be_made_again_or_deleted(tmp_path, monkeypatch):
    t = _table(tmp_path / "t")
    first = t.insert(_rows((1, "a", 1)))
    second = t.upsert(_rows((1, "a", 2)))
    _crash_when_completing(monkeypatch, Action.SAVEPOINT)
    for instant in (first, second):
        with pytest.raises(OSError):
            t.savepoint(instant)
    monkeypatch.undo()
    assert t.savepoints() == []

    assert t.savepoint(first) == first
    assert t.savepoints() == [first]
    t.delete_savepoint(second)  # what the crash left of it
    assert not any("savepoint" in name for name in _timeline_files(t) if name.startswith(second))
    with pytest.raises(InstantNotFoundError):
        t.delete_savepoint(second)
    assert _read(t, as_of=first) == _expected((1, "a", 1))


# ---- the command line ----------------------------------------------------------------------


def _latest_base_file(t: shoal.Table) -> Path:
    (sl,) = t.file_slices()
    return Path(t.path) / sl.base_file.path


def test_cli_reports_a_damaged_data_file_without_a_traceback(tmp_path, capsys):
    t = _table(tmp_path / "t")
    t.insert(_rows((1, "a", 1)))
    base = _latest_base_file(t)
    base.write_bytes(base.read_bytes()[:100])

    assert cli_main(["show", t.path]) != 0
    err = capsys.readouterr().err
    assert base.name in err or "parquet" in err.lower()
    base.unlink()
    (Path(t.path) / ".hoodie" / "hoodie.properties").write_bytes(b"\xff\xfe not properties")
    assert cli_main(["info", t.path]) != 0


def test_cli_checks_its_arguments_before_printing(tmp_path, capsys):
    t = _table(tmp_path / "t")
    t.insert(_rows((1, "a", 1)))
    with pytest.raises(SystemExit) as exc:
        cli_main(["show", t.path, "--limit", "-1"])
    assert exc.value.code == 2
    capsys.readouterr()
    assert cli_main(["stats", t.path, "--as-of", "yesterday"]) == 2
    captured = capsys.readouterr()
    assert "InvalidArgumentError" in captured.err and "records written" not in captured.out


def test_cli_prints_values_that_look_like_markup_as_they_are(tmp_path, capsys):
    t = shoal.Table.create(
        str(tmp_path / "t"), name="t", record_key="id", partition_by="part", ordering_field="ts"
    )
    t.insert(pa.table({"id": ["[/x]", "[bold]k"], "part": ["[red]a", "b"], "ts": [1, 1]}))
    assert cli_main(["show", t.path]) == 0
    assert cli_main(["files", t.path]) == 0
    out = capsys.readouterr().out
    assert "[/x]" in out and "[bold]k" in out and "[red]a" in out
    assert cli_main(["savepoint", t.path, "[/x]"]) == 2
    assert cli_main(["delete-partition", t.path, "[red]zz"]) == 2
    err = capsys.readouterr().err
    assert "[/x]" in err and "[red]zz" in err


def test_rolling_back_a_delta_commit_a_pending_compaction_planned_over_keeps_the_plan_runnable(tmp_path):
    """The log file the rolled-back delta commit created is in the pending compaction's plan: it
    is neutralised with a rollback block rather than deleted, so the compaction still runs and
    leaves the rolled-back records out."""
    t = _table(tmp_path / "t", "MERGE_ON_READ")
    t.insert(_rows((1, "a", 1), (2, "a", 1)))
    t.upsert(_rows((1, "a", 2)))
    compaction = t.schedule_compaction()
    assert compaction is not None

    t.rollback()

    assert _read(t) == _expected((1, "a", 1), (2, "a", 1))
    assert t.compact() == [compaction]
    assert _read(t) == _expected((1, "a", 1), (2, "a", 1))
    assert rows_by(hudi_rs_read(t.path), COLUMNS, ["id"]) == _read(t)
    t.upsert(_rows((2, "a", 3)))
    assert _read(t) == _expected((1, "a", 1), (2, "a", 3))
