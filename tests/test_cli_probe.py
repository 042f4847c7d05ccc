"""The ``shoal`` command as an operator of a production table uses it: output piped into grep or
a log, errors a script can read on one line, options that contradict each other refused before
anything changes, and the instants, files and counts each command reports checked against the
table's files on disk."""

from __future__ import annotations

import datetime
import importlib
import os
import re
from pathlib import Path

import pyarrow as pa
import pytest

import shoal
from shoal.cli import main
from shoal.fs.naming import parse_base_file_name, parse_log_file_name
from shoal.timeline.instant import Action
from shoal.timeline.timeline import Timeline

from .table_files import file_digests

# shoal.cli's ``main`` is the function; its module holds the console.
CLI = importlib.import_module("shoal.cli.main")
QUIET = {"hoodie.clean.automatic": "false", "hoodie.archive.automatic": "false"}


def _table(path: Path, table_type: str = "COPY_ON_WRITE", **options: str) -> shoal.Table:
    return shoal.Table.create(
        str(path),
        name="t",
        table_type=table_type,
        record_key="id",
        partition_by="city",
        ordering_field="ts",
        options={**QUIET, **options},
    )


def _rows(*rows: tuple[int, str, int]) -> pa.Table:
    return pa.Table.from_pylist([{"id": i, "city": c, "ts": ts} for i, c, ts in rows])


def _hoodie(t: shoal.Table) -> list[str]:
    return sorted(os.listdir(Path(t.path) / ".hoodie"))


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    """The exit code, and what the command printed: stdout on success; stderr on failure, where
    stdout holds only what the command reported done before it failed."""
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out if code == 0 else captured.err


def _cells(out: str) -> list[list[str]]:
    """The body rows of the tables in ``out``, one list of stripped cells per line."""
    return [[c.strip() for c in line.split("│")[1:-1]] for line in out.splitlines() if line.startswith("│")]


@pytest.fixture
def piped(monkeypatch: pytest.MonkeyPatch) -> None:
    """Output to a pipe: no terminal (capsys), no COLUMNS."""
    monkeypatch.delenv("COLUMNS", raising=False)


# ---- output that keeps what the operator copies whole ---------------------------------------


def test_piped_output_keeps_file_ids_instants_and_values_whole(tmp_path, capsys, piped):
    """`shoal files PATH | grep` used to get 80 columns: "c09931c6-1d4c-…", "202611240856185…"."""
    t = _table(tmp_path / "t", "MERGE_ON_READ")
    first = t.upsert(_rows((1, "a", 1), (2, "b", 1)))
    t.upsert(_rows((1, "a", 2)))
    bases = {parse_base_file_name(p.name) for p in Path(t.path).rglob("*.parquet")}
    logs = [p for p in Path(t.path).rglob(".*.log.*")]
    code, out = _run(capsys, "files", t.path)
    assert code == 0
    rows = {r[1]: r for r in _cells(out)}
    assert set(rows) == {b.file_id for b in bases if b}
    for b in bases:
        assert b is not None
        partition, _, base_instant, base_bytes, n_logs, log_bytes = rows[b.file_id]
        assert base_instant == b.instant_time == first
        group_logs = [p for p in logs if parse_log_file_name(p.name).file_id == b.file_id]
        assert int(n_logs) == len(group_logs) == (1 if partition == "a" else 0)
        assert int(log_bytes) == sum(p.stat().st_size for p in group_logs)
        (base_file,) = Path(t.path, partition).glob(f"{b.file_id}*.parquet")
        assert int(base_bytes) == base_file.stat().st_size
    code, out = _run(capsys, "show", t.path)
    assert code == 0 and "…" not in out
    # Record 2 (city b) was never updated: its _hoodie_file_name is b's base file.
    (name,) = (p.name for p in Path(t.path, "b").glob("*.parquet"))
    assert name in out.split() and first in out.split()


def test_a_narrow_terminal_folds_values_rather_than_cutting_them(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "60")
    monkeypatch.setattr(CLI.console, "width", 60)
    t = _table(tmp_path / "t")
    t.upsert(_rows((1, "a", 1)))
    for command in (
        ["files", t.path],
        ["show", t.path],
        ["timeline", t.path],
        ["commit", t.path],
        ["info", t.path],
    ):
        code, out = _run(capsys, *command)
        assert code == 0 and "…" not in out, command
    code, out = _run(capsys, "files", t.path)
    (name,) = (p.name for p in Path(t.path, "a").glob("*.parquet"))
    file_id = parse_base_file_name(name).file_id
    # The file id column folded over lines: its pieces, in order, are the id.
    column = [r[1] for r in _cells(out)]
    assert "".join(column) == file_id


def test_an_error_is_one_line_however_long(capsys, monkeypatch, fixture_table):
    """Version 8 refusals run to 250 characters; a terminal of 80 used to cut them in 4 lines."""
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setattr(CLI.console, "width", 80)
    root = fixture_table("cow_v8_nonpartitioned")
    before = file_digests(root)
    assert main(["clean", str(root)]) == 2
    captured = capsys.readouterr()
    # On stderr: a script reading the output of a failed command reads nothing.
    out = captured.err
    assert captured.out == ""
    assert len(out.strip().splitlines()) == 1 and len(out.strip()) > 80
    assert out.startswith("UnsupportedError: ") and "version 8" in out
    assert file_digests(root) == before


# ---- commit ---------------------------------------------------------------------------------


def test_commit_refuses_an_instant_that_is_not_a_commit(tmp_path, capsys):
    """A clean's or rollback's instant used to print an empty "(UNKNOWN)" table, as if the
    commit had written nothing."""
    t = _table(tmp_path / "t")
    for ts in (1, 2, 3):
        t.upsert(_rows((1, "a", ts)))
    (clean,) = t.clean(options={"hoodie.cleaner.commits.retained": "1"})
    t.upsert(_rows((2, "a", 1)))
    rollback = t.rollback()
    for instant, action in ((clean, "clean"), (rollback, "rollback")):
        code, out = _run(capsys, "commit", t.path, "--instant", instant)
        assert code == 2
        assert out.startswith("InvalidArgumentError") and f"is a {action} instant" in out
        assert "UNKNOWN" not in out and "┃" not in out


def test_commit_of_a_pending_instant_says_so(tmp_path, capsys):
    t = _table(tmp_path / "t")
    t.upsert(_rows((1, "a", 1)))
    timeline = Timeline.load(t.storage, t.config)
    pending = timeline.new_instant_time()
    timeline.create_requested(pending, Action.COMMIT)
    code, out = _run(capsys, "commit", t.path, "--instant", pending)
    assert code == 2 and out.startswith("InstantNotFoundError") and "requested" in out


def test_commit_shows_an_archived_commit(tmp_path, capsys):
    """Hudi's CLI shows archived commits (commits showarchived); shoal said "no completed
    instant" for them."""
    t = _table(
        tmp_path / "t",
        **{
            "hoodie.keep.min.commits": "2",
            "hoodie.keep.max.commits": "3",
            "hoodie.cleaner.commits.retained": "1",
        },
    )
    first = t.upsert(_rows((1, "a", 1), (2, "b", 1), (3, "b", 1)))
    for ts in (2, 3, 4):
        t.upsert(_rows((1, "a", ts)))
    assert next(i.requested_time for i in t.archive().archived) == first
    code, out = _run(capsys, "commit", t.path, "--instant", first)
    assert code == 0 and "archived" in out
    rows = {r[0]: r for r in _cells(out)}
    # The first write: 1 insert into a, 2 into b, each a new base file named with its instant.
    assert {p: (r[2], r[4]) for p, r in rows.items()} == {"a": ("1", "1"), "b": ("2", "2")}
    assert all(parse_base_file_name(r[1]).instant_time == first for r in rows.values())
    code, out = _run(capsys, "commit", t.path, "--instant", "20000101000000000")
    assert code == 2 and "active or the archived timeline" in out


# ---- show -----------------------------------------------------------------------------------


def test_show_columns_are_trimmed_and_empty_names_refused(tmp_path, capsys, piped):
    t = _table(tmp_path / "t")
    t.upsert(_rows((1, "a", 1), (2, "b", 7)))
    code, out = _run(capsys, "show", t.path, "--columns", "id, ts")
    assert code == 0
    assert sorted(_cells(out)) == [["1", "1"], ["2", "7"]]
    for bad in ("", " ", "id,,ts", "id,"):
        code, out = _run(capsys, "show", t.path, "--columns", bad)
        assert code == 2 and out.startswith("InvalidArgumentError"), bad


def test_show_says_when_it_prints_fewer_rows_than_it_counts(tmp_path, capsys, piped):
    t = _table(tmp_path / "t")
    t.upsert(_rows(*((i, "a", 1) for i in range(5))))
    code, out = _run(capsys, "show", t.path, "--limit", "2", "--columns", "id")
    assert code == 0 and out.splitlines()[0] == "5 rows (first 2 shown)" and len(_cells(out)) == 2
    code, out = _run(capsys, "show", t.path, "--limit", "0")
    assert code == 0 and out.splitlines() == ["5 rows"]  # the count alone
    code, out = _run(capsys, "show", t.path, "--limit", "5")
    assert code == 0 and out.splitlines()[0] == "5 rows"


# ---- rollback, restore, clean, savepoints: what was done ------------------------------------


def test_rollback_and_restore_name_the_commits_they_undid(tmp_path, capsys):
    t = _table(tmp_path / "t")
    first = t.upsert(_rows((1, "a", 1)))
    second = t.upsert(_rows((2, "a", 1)))
    third = t.upsert(_rows((3, "b", 1)))
    code, out = _run(capsys, "rollback", t.path)
    assert code == 0 and f"rolled back commit {third} as rollback instant" in out
    t.savepoint(first)
    code, out = _run(capsys, "restore", t.path, first)
    assert code == 0 and out.strip().endswith(f"rolled back commit {second}")


def test_clean_reports_the_files_it_deleted(tmp_path, capsys):
    t = _table(tmp_path / "t")
    first = t.upsert(_rows((1, "a", 1), (2, "b", 1)))
    for ts in (2, 3):
        t.upsert(_rows((1, "a", ts), (2, "b", ts)))
    before = {p.name for p in Path(t.path).rglob("*.parquet")}
    code, out = _run(capsys, "clean", t.path, "--retain-commits", "1")
    after = {p.name for p in Path(t.path).rglob("*.parquet")}
    # Hudi retains the last commit, and the versions before it that a query started before it
    # may still read: the second. The first versions of both file groups go.
    assert code == 0 and len(before - after) == 2 and len(after) == 4
    assert {parse_base_file_name(n).instant_time for n in before - after} == {first}
    (line,) = out.splitlines()
    last = t.latest_instant()
    assert re.fullmatch(rf"clean \d{{17}} completed: 2 files deleted, earliest commit retained {last}", line)


def test_savepoints_lists_who_when_and_why(tmp_path, capsys):
    t = _table(tmp_path / "t")
    code, out = _run(capsys, "savepoints", t.path)
    assert code == 0 and out.strip() == "no savepoints"
    first = t.upsert(_rows((1, "a", 1)))
    assert main(["savepoint", t.path, first, "--comment", "before the backfill"]) == 0
    capsys.readouterr()
    code, out = _run(capsys, "savepoints", t.path)
    ((instant, at, by, comment),) = _cells(out)
    assert (instant, comment) == (first, "before the backfill")
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", at) and by


# ---- contradictory or incomplete options: refused, nothing changed ---------------------------


def test_clean_refuses_a_retention_the_policy_ignores(tmp_path, capsys):
    """`clean --retain-versions 1` used to run the default KEEP_LATEST_COMMITS policy (10
    commits) and say "nothing to clean", the retention silently ignored."""
    t = _table(tmp_path / "t")
    for ts in (1, 2, 3):
        t.upsert(_rows((1, "a", ts)))
    before, timeline = file_digests(Path(t.path)), _hoodie(t)
    for argv in (
        ["--retain-versions", "1"],
        ["--retain-hours", "0"],
        ["--policy", "KEEP_LATEST_FILE_VERSIONS", "--retain-commits", "1"],
        ["--policy", "KEEP_LATEST_BY_HOURS", "--retain-versions", "1"],
        ["-o", "hoodie.cleaner.policy=KEEP_LATEST_COMMITS", "--policy", "KEEP_LATEST_FILE_VERSIONS"],
    ):
        code, out = _run(capsys, "clean", t.path, *argv)
        assert code == 2 and out.startswith("InvalidArgumentError"), argv
        assert len(out.strip().splitlines()) == 1
        assert file_digests(Path(t.path)) == before and _hoodie(t) == timeline
    # The policy that reads the retention, named either way, runs: one version of 3 kept.
    code, out = _run(
        capsys,
        "clean",
        t.path,
        "-o",
        "hoodie.cleaner.policy=KEEP_LATEST_FILE_VERSIONS",
        "--retain-versions",
        "1",
    )
    assert code == 0 and "2 files deleted" in out
    assert len(list(Path(t.path, "a").glob("*.parquet"))) == 1


def test_savepoint_delete_needs_an_instant_and_takes_no_comment(tmp_path, capsys):
    t = _table(tmp_path / "t")
    first = t.upsert(_rows((1, "a", 1)))
    t.savepoint(first)
    timeline = _hoodie(t)
    code, out = _run(capsys, "savepoint", t.path, "--delete")
    assert code == 2 and out.startswith("InvalidArgumentError")
    code, out = _run(capsys, "savepoint", t.path, first, "--delete", "--comment", "why")
    assert code == 2 and out.startswith("InvalidArgumentError")
    assert _hoodie(t) == timeline and t.savepoints() == [first]


def test_compact_run_refuses_if_due(tmp_path, capsys):
    t = _table(tmp_path / "m", "MERGE_ON_READ")
    t.upsert(_rows((1, "a", 1)))
    t.upsert(_rows((1, "a", 2)))
    pending = t.schedule_compaction()
    assert pending is not None
    timeline = _hoodie(t)
    code, out = _run(capsys, "compact", t.path, "--run", pending, "--if-due")
    assert code == 2 and out.startswith("InvalidArgumentError")
    assert _hoodie(t) == timeline


def test_compact_reports_the_compaction_it_completed_before_scheduling_failed(tmp_path, capsys):
    """`compact` runs pending compactions, then schedules one: a write pending before the new
    plan refuses it, and the error used to be all the operator saw of a compaction that ran."""
    t = _table(tmp_path / "m", "MERGE_ON_READ")
    t.upsert(_rows((1, "a", 1)))
    t.upsert(_rows((1, "a", 2)))
    pending = t.schedule_compaction()
    timeline = Timeline.load(t.storage, t.config)
    writer = timeline.new_instant_time()
    timeline.create_requested(writer, Action.DELTA_COMMIT)  # a live writer's instant
    assert main(["compact", t.path]) == 2
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [f"compaction {pending} completed"]
    assert captured.err.startswith("CommitConflictError")
    assert t.pending_compactions() == []


def test_demo_takes_a_positive_number_of_batches_and_no_table_options(capsys):
    """`shoal demo --batches 0` ran and died with "ArrowInvalid: ... order_id"; `-o` was
    accepted and ignored."""
    for argv in (["demo", "--batches", "0"], ["demo", "--batches", "-1"], ["demo", "-o", "a=b"]):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2, argv
        err = capsys.readouterr().err
        assert "expected a positive integer" in err or "unrecognized arguments: -o" in err


# ---- help -----------------------------------------------------------------------------------


def test_every_subcommand_describes_its_arguments(capsys):
    parser = CLI.build_parser()
    (commands,) = [a for a in parser._actions if a.choices and isinstance(a.choices, dict)]
    assert len(commands.choices) >= 15
    for name, sub in commands.choices.items():
        with pytest.raises(SystemExit) as exc:
            main([name, "--help"])
        assert exc.value.code == 0
        text = capsys.readouterr().out
        for action in sub._actions:
            assert action.help, f"{name} {action.dest}: no help"
            assert "".join(action.help.split()) in "".join(text.split()), (name, action.dest)


# ---- timeline -------------------------------------------------------------------------------


def test_timeline_of_a_version_6_table_shows_when_each_instant_reached_its_state(tmp_path, capsys, piped):
    """Version 6 records no completion time: the column was always empty. Hudi 0.14 takes the
    state file's modification time (and archives it as stateTransitionTime)."""
    import datetime as dt

    t = _table(tmp_path / "t")
    first = t.upsert(_rows((1, "a", 1)))
    timeline = Timeline.load(t.storage, t.config)
    pending = timeline.new_instant_time()
    timeline.create_requested(pending, Action.COMMIT)
    files = {first: f"{first}.commit", pending: f"{pending}.commit.requested"}
    code, out = _run(capsys, "timeline", t.path)
    assert code == 0 and "state transition time (UTC)" in out
    rows = {r[0]: r for r in _cells(out)}
    assert set(rows) == set(files)
    for instant, name in files.items():
        millis = os.stat(Path(t.path, ".hoodie", name)).st_mtime_ns // 1_000_000
        moment = dt.datetime.fromtimestamp(millis // 1000, dt.timezone.utc)
        assert rows[instant][3] == moment.strftime("%Y%m%d%H%M%S") + f"{millis % 1000:03d}"
    assert rows[first][1:3] == ["commit", "COMPLETED"] and rows[pending][1:3] == ["commit", "REQUESTED"]


def test_delete_partition_refuses_an_empty_partition_path(tmp_path, capsys):
    """On a non-partitioned table "" is the partition: `delete-partition PATH "$P"` with P unset
    deleted every row."""
    t = shoal.Table.create(str(tmp_path / "t"), name="t", record_key="id", options=QUIET)
    t.upsert(pa.table({"id": [1, 2], "ts": [1, 1]}))
    before, timeline = file_digests(Path(t.path)), _hoodie(t)
    for argv in ([""], [" "], ["x", ""]):
        code, out = _run(capsys, "delete-partition", t.path, *argv)
        assert code == 2 and out.startswith("InvalidArgumentError"), argv
    assert file_digests(Path(t.path)) == before and _hoodie(t) == timeline
    assert sorted(t.read()["id"].to_pylist()) == [1, 2]


def test_info_lists_pending_table_services_too(tmp_path, capsys, piped):
    """A clean or rollback a crash left pending was missing from `info`'s pending list."""
    t = _table(tmp_path / "t")
    t.upsert(_rows((1, "a", 1)))
    timeline = Timeline.load(t.storage, t.config)
    clean = timeline.new_instant_time()
    timeline.transition_to_inflight(timeline.create_requested(clean, Action.CLEAN))
    write = timeline.new_instant_time()
    timeline.create_requested(write, Action.COMMIT)
    code, out = _run(capsys, "info", t.path)
    assert code == 0
    pending = [r[1] for r in _cells(out) if r[0] == "pending"]
    assert pending == [f"clean {clean} (inflight)", f"commit {write} (requested, no heartbeat)"]


def test_ctrl_c_ends_with_the_sigint_code_and_no_traceback(tmp_path, capsys, monkeypatch):
    t = _table(tmp_path / "t")
    t.upsert(_rows((1, "a", 1)))

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(shoal.Table, "read", interrupted)
    try:
        code = main(["show", t.path])
    except KeyboardInterrupt:
        pytest.fail("Ctrl-C escaped as a traceback")
    captured = capsys.readouterr()
    assert code == 130 and captured.err.strip() == "interrupted" and captured.out == ""


# ---- show --where / --key: filtered reads ----------------------------------------------------


def test_show_where_and_key_print_the_rows_that_pass(tmp_path, capsys, piped):
    t = _table(tmp_path / "t")
    days = [datetime.date(2025, 1, d) for d in (1, 2, 3, 4, 5, 6)]
    fares = (1.5, 2.5, 3.5, 4.5, 5.5, 6.5)
    rows = [
        {"id": i, "city": city, "ts": i, "fare": fare, "day": day}
        for i, (city, fare, day) in enumerate(zip("ab" * 3, fares, days, strict=True))
    ]
    t.bulk_insert(pa.Table.from_pylist(rows[:3]))
    t.bulk_insert(pa.Table.from_pylist(rows[3:]))
    model = {
        ("--where", "fare>=3.5"): [r for r in rows if r["fare"] >= 3.5],
        ("--where", "city = a", "--where", "ts<4"): [r for r in rows if r["city"] == "a" and r["ts"] < 4],
        ("--where", "id in 1,4,9"): [r for r in rows if r["id"] in (1, 4, 9)],
        ("--where", "day>2025-01-04"): [r for r in rows if r["day"] > datetime.date(2025, 1, 4)],
        ("--where", "city!=a"): [r for r in rows if r["city"] != "a"],
        ("--key", "2"): [r for r in rows if r["id"] == 2],
        ("--key", "0", "--key", "5", "--key", "77"): [r for r in rows if r["id"] in (0, 5)],
        ("--key", "3", "--where", "city==a"): [],
    }
    for args, expected in model.items():
        code, out = _run(capsys, "show", t.path, "--columns", "id", *args)
        assert code == 0, (args, out)
        assert out.splitlines()[0] == f"{len(expected)} rows", args
        assert sorted(int(c[0]) for c in _cells(out)) == sorted(r["id"] for r in expected), args


def test_show_where_refuses_conditions_it_cannot_read(tmp_path, capsys, piped):
    t = _table(tmp_path / "t")
    t.upsert(_rows((1, "a", 1)).append_column("day", pa.array([datetime.date(2025, 1, 1)])))
    before = _hoodie(t)
    for condition, message in (
        ("garbage", "expected COLUMN OP VALUE"),
        ("nope=1", "no column 'nope'"),
        ("ts>soon", "'soon' is not a int64 value for 'ts'"),
        ("ts=>1", "is not a int64 value"),
        ("day<2025-13-01", "'2025-13-01' is not a date32[day] value for 'day'"),
    ):
        code, out = _run(capsys, "show", t.path, "--where", condition)
        assert code == 2 and out.startswith("InvalidArgumentError") and message in out, (condition, out)
    assert _hoodie(t) == before


@pytest.mark.parametrize(
    "name", ["cow_v6_simplekeygen_hivestyle_no_metafields", "cow_v8_simplekeygen_hivestyle_no_metafields"]
)
def test_show_key_on_a_table_without_meta_fields_looks_the_key_field_up(capsys, piped, fixture_table, name):
    """Such a table stores no _hoodie_record_key: --key takes values of its one key field."""
    path = str(fixture_table(name))
    ids = sorted(shoal.Table(path).read(columns=["id"]).column("id").to_pylist())
    code, out = _run(
        capsys, "show", path, "--columns", "id", "--key", str(ids[0]), "--key", str(ids[-1]), "--key", "999"
    )
    assert code == 0 and out.splitlines()[0] == "2 rows"
    assert sorted(int(c[0]) for c in _cells(out)) == [ids[0], ids[-1]]
    code, out = _run(capsys, "show", path, "--key", "x")
    assert code == 2 and out.startswith("InvalidArgumentError") and "--key 'x'" in out
