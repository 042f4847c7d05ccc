"""Table services on tables Apache Hudi wrote, continued by shoal, as an operator adopting shoal
on an existing Hudi table would run them.

Every version 6 merge-on-read fixture takes shoal upserts and deletes (appends onto Hudi's own
file slices and log files), compactions scheduled and run by shoal, a clean and an archival
that takes Hudi's instants off the active timeline. After every step shoal's snapshot,
read-optimized, time-travel and incremental reads, and hudi-rs's snapshot and read-optimized
reads, must equal a model: the fixture's rows read before, with the writes applied. Then:
savepoints of Hudi's commits and restores to them, rollbacks of crashed shoal writes, the Avro
files the services write read with Hudi's own reader schemas (and compared with the ones Hudi
wrote), the cleaner's choices against Hudi's rules worked out by hand from the files, and the
typed errors of services that must refuse.
"""

from __future__ import annotations

import datetime as _dt
import io
import itertools
import json
import shutil
import struct
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import shoal
from shoal.config.write_config import WriteConfig
from shoal.errors import (
    CleanedInstantError,
    CommitConflictError,
    InstantNotFoundError,
    InvalidArgumentError,
    UnsupportedError,
)
from shoal.fs.naming import parse_base_file_name, parse_log_file_name
from shoal.fs.storage import Storage
from shoal.services import clean as clean_mod
from shoal.timeline.instant import Action
from shoal.timeline.instant_time import parse_instant
from shoal.timeline.timeline import Timeline
from tests.conftest import FIXTURES_DIR
from tests.hudi_oracle import hudi_rs_read
from tests.table_files import data_columns, data_files, file_digests

KEY = "_hoodie_record_key"
COMMIT_TIME = "_hoodie_commit_time"
QUIET = {"hoodie.clean.automatic": "false", "hoodie.archive.automatic": "false"}
MOR_V6 = [
    "mor_avro_v6_trips_8i1u",
    "mor_avro_v6_trips_8i3d",
    "mor_parquet_v6_complexkeygen_hivestyle",
    "mor_parquet_v6_nonpartitioned",
    "mor_parquet_v6_nonpartitioned_rollback",
    "mor_parquet_v6_simplekeygen_nonhivestyle",
    "mor_parquet_v6_simplekeygen_nonhivestyle_overwritetable",
]


def _unzip(dest: Path, name: str) -> Path:
    src = FIXTURES_DIR / f"{name}.zip"
    if not src.is_file():
        pytest.skip(f"fixture {src} not found")
    with zipfile.ZipFile(src) as z:
        z.extractall(dest, [m for m in z.namelist() if not m.startswith("__MACOSX")])
    (root,) = [p.parent.parent for p in dest.glob("*/.hoodie/hoodie.properties")]
    return root


class Model:
    """What the table must hold: record key -> row (commit time and data columns), per
    completed instant too, from the fixture's rows as read before shoal wrote."""

    def __init__(self, table: shoal.Table) -> None:
        first = table.read()
        self.columns = [COMMIT_TIME, *data_columns(first)]
        self.schema = first.select([KEY, *self.columns]).schema
        self.ordering = table.config.precombine_field
        self.key_fields = table.config.record_key_fields
        self.as_of: dict[str, dict[str, dict]] = {}
        for entry in table.timeline:
            if entry.action in ("commit", "deltacommit", "replacecommit"):
                self.as_of[entry.time] = self._by_key(hudi_rs_read(table.path, as_of=entry.time))
        self.rows: dict[str, dict] = self._by_key(first)
        self.fixture = first

    def _by_key(self, rows: pa.Table) -> dict[str, dict]:
        if rows.num_rows == 0:
            return {}
        return {r[KEY]: r for r in rows.select([KEY, *self.columns]).cast(self.schema).to_pylist()}

    def expected(self, rows: dict[str, dict] | None = None) -> list[dict]:
        return sorted((self.rows if rows is None else rows).values(), key=lambda r: r[KEY])

    def canonical(self, rows: pa.Table) -> list[dict]:
        return sorted(rows.select([KEY, *self.columns]).cast(self.schema).to_pylist(), key=lambda r: r[KEY])

    def later(self, rows: pa.Table, by: int) -> pa.Table:
        """``rows`` (data columns) with their ordering value ``by`` later."""
        rows = rows.select(self.columns[1:])
        if self.ordering:
            column = rows.column(self.ordering)
            later = pc.add(column, by).cast(column.type)
            rows = rows.set_column(rows.column_names.index(self.ordering), self.ordering, later)
        return rows

    def upsert(self, table: shoal.Table, rows: pa.Table) -> str:
        instant = table.upsert(rows)
        for row in rows.to_pylist():
            self.rows[self._key_of(row)] = {KEY: self._key_of(row), COMMIT_TIME: instant, **row}
        self.as_of[instant] = dict(self.rows)
        return instant

    def delete(self, table: shoal.Table, rows: pa.Table) -> str:
        instant = table.delete(rows.select(self.columns[1:]))
        for row in rows.to_pylist():
            self.rows.pop(self._key_of(row), None)
        self.as_of[instant] = dict(self.rows)
        return instant

    def _key_of(self, row: dict) -> str:
        # The data columns identify the fixture row the write changes: its stored key.
        fixture = self.fixture.select([KEY, *self.columns[1:]]).to_pylist()
        keys = [r[KEY] for r in fixture if all(r[c] == row[c] for c in self.key_fields)]
        assert len(keys) == 1, row
        return str(keys[0])


def _open(root: Path) -> tuple[shoal.Table, Model]:
    table = shoal.Table(str(root), options=QUIET)
    return table, Model(table)


def _completed_data_instants(table: shoal.Table) -> list[str]:
    return [i.requested_time for i in Timeline.load(table.storage, table.config).completed_data_instants()]


def _check(table: shoal.Table, model: Model, step: str, readable_from: str = "") -> None:
    """shoal and hudi-rs read the model; time travel and incremental reads over the completed
    instants still on the active timeline read its states (the instants before
    ``readable_from``, whose slices a clean may have removed, may refuse with
    CleanedInstantError instead)."""
    expected = model.expected()
    assert model.canonical(table.read()) == expected, step
    theirs = hudi_rs_read(table.path)
    assert (model.canonical(theirs) if theirs.num_rows else []) == expected, f"hudi-rs, {step}"
    ours_ro = model.canonical(table.read(query_type="read_optimized"))
    theirs_ro = hudi_rs_read(table.path, read_optimized=True)
    assert ours_ro == (model.canonical(theirs_ro) if theirs_ro.num_rows else []), f"read-optimized, {step}"
    instants = [i for i in _completed_data_instants(table) if i in model.as_of]
    for instant in instants:
        try:
            rows = table.read(as_of=instant)
        except CleanedInstantError:
            assert instant < readable_from, f"as of {instant}, {step}"
            continue
        assert model.canonical(rows) == model.expected(model.as_of[instant]), f"as of {instant}, {step}"
    for start, end in itertools.pairwise(instants):
        try:
            changes = table.read_incremental(start=start, end=end)
        except CleanedInstantError:
            assert end < readable_from, f"incremental ({start}, {end}], {step}"
            continue
        written = [r for r in model.expected(model.as_of[end]) if start < r[COMMIT_TIME] <= end]
        assert model.canonical(changes) == written, f"incremental ({start}, {end}], {step}"


# ---- Hudi's reader schemas ------------------------------------------------------------------
# Java reads a timeline file by resolving the file's writer schema against the schema it was
# generated from (hudi-common/src/main/avro): a field missing from the file must have a default
# there. These are those reader schemas, so that fastavro resolves the files as Java would.

_NS = "org.apache.hudi.avro.model"
_STRINGS = {"type": "array", "items": "string"}
_SIZES = ["null", {"type": "map", "values": "long"}]


def _record(name: str, *fields: dict) -> dict:
    return {"namespace": _NS, "type": "record", "name": name, "fields": list(fields)}


def _field(name: str, type_: Any, **default: Any) -> dict:
    return {"name": name, "type": type_, **default}


_INSTANT_INFO = _record("HoodieInstantInfo", _field("commitTime", "string"), _field("action", "string"))
_CLEAN_PARTITION = _record(
    "HoodieCleanPartitionMetadata",
    _field("partitionPath", "string"),
    _field("policy", "string"),
    _field("deletePathPatterns", _STRINGS),
    _field("successDeleteFiles", _STRINGS),
    _field("failedDeleteFiles", _STRINGS),
    _field("isPartitionDeleted", ["null", "boolean"], default=None),
)
_ROLLBACK_METADATA = _record(
    "HoodieRollbackMetadata",
    _field("startRollbackTime", "string"),
    _field("timeTakenInMillis", "long"),
    _field("totalFilesDeleted", "int"),
    _field("commitsRollback", _STRINGS),
    _field(
        "partitionMetadata",
        {
            "type": "map",
            "values": _record(
                "HoodieRollbackPartitionMetadata",
                _field("partitionPath", "string"),
                _field("successDeleteFiles", _STRINGS),
                _field("failedDeleteFiles", _STRINGS),
                _field("rollbackLogFiles", _SIZES, default=None),
                _field("logFilesFromFailedCommit", _SIZES, default=None),
            ),
        },
    ),
    _field("version", ["int", "null"], default=1),
    _field("instantsRollback", {"type": "array", "items": f"{_NS}.HoodieInstantInfo"}, default=[]),
)
HUDI_READERS: dict[str, dict] = {
    "clean": _record(
        "HoodieCleanMetadata",
        _field("policy", "string", default=""),
        _field("startCleanTime", "string"),
        _field("timeTakenInMillis", "long"),
        _field("totalFilesDeleted", "int"),
        _field("earliestCommitToRetain", "string"),
        _field("lastCompletedCommitTimestamp", "string", default=""),
        _field("partitionMetadata", {"type": "map", "values": f"{_NS}.HoodieCleanPartitionMetadata"}),
        _field("version", ["int", "null"], default=1),
        _field(
            "bootstrapPartitionMetadata",
            ["null", {"type": "map", "values": f"{_NS}.HoodieCleanPartitionMetadata"}],
            default=None,
        ),
    ),
    "clean.requested": _record(
        "HoodieCleanerPlan",
        _field(
            "earliestInstantToRetain",
            [
                "null",
                _record(
                    "HoodieActionInstant",
                    _field("timestamp", "string"),
                    _field("action", "string"),
                    _field("state", "string"),
                ),
            ],
            default=None,
        ),
        _field("policy", "string"),
        _field("filesToBeDeletedPerPartition", ["null", {"type": "map", "values": _STRINGS}], default=None),
        _field("version", ["int", "null"], default=1),
        _field(
            "filePathsToBeDeletedPerPartition",
            [
                "null",
                {
                    "type": "map",
                    "values": {
                        "type": "array",
                        "items": _record(
                            "HoodieCleanFileInfo",
                            _field("filePath", ["null", "string"], default=None),
                            _field("isBootstrapBaseFile", ["null", "boolean"], default=None),
                        ),
                    },
                },
            ],
            default=None,
        ),
        _field("partitionsToBeDeleted", ["null", _STRINGS], default=None),
    ),
    "compaction.requested": _record(
        "HoodieCompactionPlan",
        _field(
            "operations",
            [
                "null",
                {
                    "type": "array",
                    "items": _record(
                        "HoodieCompactionOperation",
                        _field("baseInstantTime", ["null", "string"]),
                        _field("deltaFilePaths", ["null", _STRINGS], default=None),
                        _field("dataFilePath", ["null", "string"], default=None),
                        _field("fileId", ["null", "string"]),
                        _field("partitionPath", ["null", "string"], default=None),
                        _field("metrics", ["null", {"type": "map", "values": "double"}], default=None),
                    ),
                },
            ],
            default=None,
        ),
        _field("extraMetadata", ["null", {"type": "map", "values": "string"}], default=None),
        _field("version", ["int", "null"], default=1),
    ),
    "rollback": _ROLLBACK_METADATA,
    "rollback.requested": _record(
        "HoodieRollbackPlan",
        _field("instantToRollback", ["null", f"{_NS}.HoodieInstantInfo"], default=None),
        _field(
            "RollbackRequests",
            [
                "null",
                {
                    "type": "array",
                    "items": _record(
                        "HoodieRollbackRequest",
                        _field("partitionPath", "string"),
                        _field("fileId", ["null", "string"], default=None),
                        _field("latestBaseInstant", ["null", "string"], default=None),
                        _field("filesToBeDeleted", _STRINGS, default=[]),
                        _field("logBlocksToBeDeleted", _SIZES, default=None),
                    ),
                },
            ],
            default=None,
        ),
        _field("version", ["int", "null"], default=1),
    ),
    "savepoint": _record(
        "HoodieSavepointMetadata",
        _field("savepointedBy", "string"),
        _field("savepointedAt", "long"),
        _field("comments", "string"),
        _field(
            "partitionMetadata",
            {
                "type": "map",
                "values": _record(
                    "HoodieSavepointPartitionMetadata",
                    _field("partitionPath", "string"),
                    _field("savepointDataFile", _STRINGS),
                ),
            },
        ),
    ),
    "restore": _record(
        "HoodieRestoreMetadata",
        _field("startRestoreTime", "string"),
        _field("timeTakenInMillis", "long"),
        _field("instantsToRollback", _STRINGS),
        _field(
            "hoodieRestoreMetadata",
            {"type": "map", "values": {"type": "array", "items": ["null", f"{_NS}.HoodieRollbackMetadata"]}},
        ),
        _field("version", ["int", "null"], default=1),
        _field("restoreInstantInfo", {"type": "array", "items": f"{_NS}.HoodieInstantInfo"}, default=[]),
        _field("extraMetadata", ["null", {"type": "map", "values": "string"}], default=None),
    ),
    "restore.requested": _record(
        "HoodieRestorePlan",
        _field("instantsToRollback", {"type": "array", "items": f"{_NS}.HoodieInstantInfo"}, default=[]),
        _field("version", ["int", "null"], default=2),
        _field("savepointToRestoreTimestamp", ["null", "string"], default=None),
    ),
}
HUDI_READERS["clean.inflight"] = HUDI_READERS["clean.requested"]


def _hudi_read(path: Path, kind: str) -> dict:
    """The one record of the Avro timeline file at ``path``, as Hudi's reader schema for
    ``kind`` resolves it (a missing field without a default there fails)."""
    named: dict[str, Any] = {}
    for shared in (_INSTANT_INFO, _CLEAN_PARTITION, _ROLLBACK_METADATA):
        fastavro.parse_schema(shared, named_schemas=named)
    reader = fastavro.parse_schema(HUDI_READERS[kind], named_schemas=named)
    with open(path, "rb") as f:
        records = list(fastavro.reader(f, reader_schema=reader))
    assert len(records) == 1, path
    return dict(records[0])


# ---- merge-on-read: writes, compaction, clean, archival -----------------------------------


@pytest.mark.parametrize("name", MOR_V6)
def test_writes_compaction_clean_and_archival_on_a_hudi_merge_on_read_table(tmp_path, name):
    root = _unzip(tmp_path, name)
    table, model = _open(root)
    hudi_instants = _completed_data_instants(table)
    rows = model.fixture
    n = rows.num_rows
    _check(table, model, "the fixture")

    model.upsert(table, model.later(rows.slice(0, min(3, n)), 10))  # logs onto Hudi's slices
    _check(table, model, "upsert")
    model.delete(table, rows.slice(n - 1, 1))
    _check(table, model, "delete")
    model.upsert(table, model.later(rows.slice(0, 1), 20))
    _check(table, model, "second upsert")

    first = table.compact()
    assert len(first) == 1
    model.as_of[first[0]] = dict(model.rows)
    _check(table, model, "compaction")
    # Every slice with logs was compacted: the base files alone hold the table.
    assert model.canonical(table.read(query_type="read_optimized")) == model.expected()

    model.upsert(table, model.later(rows.slice(n - 1, 1), 30))  # back after its delete
    before_second = model.upsert(table, model.later(rows.slice(0, 1), 40))
    second = table.compact()
    assert len(second) == 1
    model.as_of[second[0]] = dict(model.rows)
    _check(table, model, "second compaction")
    assert model.canonical(table.read(query_type="read_optimized")) == model.expected()
    last = model.upsert(table, model.later(rows.slice(0, 1), 50))

    slices = _slices(root)
    cleaned = table.clean(options={"hoodie.cleaner.commits.retained": "2"})
    assert len(cleaned) == 1
    # KEEP_LATEST_COMMITS with 2: the earliest commit to retain is the second compaction. Every
    # file group keeps its latest slice and the last one based before it; older ones go, with
    # the logs shoal appended to Hudi's slices.
    _check(table, model, "clean", readable_from=second[0])
    expected = set()
    replaced = _replaced_by_hudi(root)  # replaced before the ECTR: the whole file group goes
    for group, by_base in slices.items():
        bases = sorted(by_base)
        if group in replaced:
            expected |= {f for files in by_base.values() for f in files}
            continue
        keep = {bases[-1], max((b for b in bases if b < second[0]), default="")}
        expected |= {f for b in bases if b < second[0] and b not in keep for f in by_base[b]}
    assert expected, "Hudi's slices of the compacted file groups"
    before_clean = {f for by_base in slices.values() for files in by_base.values() for f in files}
    assert before_clean - data_files(str(root)) == expected

    result = table.archive(
        options={
            "hoodie.keep.min.commits": "3",
            "hoodie.keep.max.commits": "4",
            "hoodie.cleaner.commits.retained": "2",
        }
    )
    # Above 4 commits, the oldest go down to 3: Hudi's instants among them.
    archived = {i.requested_time for i in result.archived}
    assert set(hudi_instants) <= archived
    assert _completed_data_instants(table) == [before_second, second[0], last]
    assert set(hudi_instants) <= {i.requested_time for i in table.archived_timeline.completed()}
    _check(table, model, "archival", readable_from=second[0])
    with pytest.raises(InstantNotFoundError):
        table.read_incremental(start=hudi_instants[0])
    model.upsert(table, model.later(rows.slice(0, 1), 60))
    _check(table, model, "a write after archival", readable_from=second[0])


def _parsed(path: str) -> Any:
    name = Path(path).name
    parsed = parse_base_file_name(name) or parse_log_file_name(name)
    assert parsed is not None, path
    return parsed


def _replaced_by_hudi(root: Path) -> set[tuple[str, str]]:
    """The file groups the fixture's replace commits replaced, from Hudi's own JSON."""
    out = set()
    for path in (root / ".hoodie").glob("*.replacecommit"):
        replaced = json.loads(path.read_text()).get("partitionToReplaceFileIds") or {}
        out |= {(partition, fid) for partition, fids in replaced.items() for fid in fids}
    return out


def _slices(root: Path, only: set[str] | None = None) -> dict[tuple[str, str], dict[str, list[str]]]:
    """(partition, file id) -> base instant -> the files of that slice, from the file names (of
    the data files ``only`` names, by default all)."""
    out: dict[tuple[str, str], dict[str, list[str]]] = {}
    for path in sorted(data_files(str(root)) if only is None else only):
        parsed = _parsed(path)
        partition = path.rsplit("/", 1)[0] if "/" in path else ""
        out.setdefault((partition, parsed.file_id), {}).setdefault(parsed.instant_time, []).append(path)
    return out


# ---- savepoint and restore ----------------------------------------------------------------


def _written_by_hudi(root: Path, after: str) -> set[str]:
    """The data files the fixture's commits after ``after`` wrote, from Hudi's commit JSON."""
    out = set()
    for path in (root / ".hoodie").iterdir():
        instant, _, ext = path.name.partition(".")
        if ext in ("commit", "deltacommit", "replacecommit") and instant > after:
            stats = json.loads(path.read_text())["partitionToWriteStats"]
            out |= {s["path"] for ss in stats.values() for s in ss if s.get("path")}
    return out


def _crash_completing(monkeypatch: pytest.MonkeyPatch, *actions: Action) -> None:
    """The process dies as it would publish the completed file of an instant of ``actions``."""
    real = Timeline.complete

    def complete(self: Timeline, instant: Any, content: bytes) -> Any:
        if instant.action in actions:
            raise OSError("killed")
        return real(self, instant, content)

    monkeypatch.setattr(Timeline, "complete", complete)


RESTORES = [
    ("mor_avro_v6_trips_8i1u", 0),
    ("mor_parquet_v6_complexkeygen_hivestyle", 0),
    ("mor_parquet_v6_nonpartitioned_rollback", -1),
    ("mor_parquet_v6_simplekeygen_nonhivestyle_overwritetable", 1),
    ("cow_v6_simplekeygen_nonhivestyle_overwritetable", 1),
    ("cow_v6_timebasedkeygen_nonhivestyle", 0),
]


@pytest.mark.parametrize(("name", "which"), RESTORES)
def test_restore_to_a_savepoint_of_a_commit_hudi_wrote(tmp_path, monkeypatch, name, which):
    """Savepoint a Hudi commit, write (compact, clean) with shoal, crash a write, restore: the
    table is the fixture as of that commit on shoal and hudi-rs, and every file written after
    it is gone, Hudi's later commits' included."""
    root = _unzip(tmp_path, name)
    table, model = _open(root)
    fixture_files = data_files(str(root))
    hudi_instants = _completed_data_instants(table)
    savepoint = hudi_instants[which]
    as_of = model.expected(model.as_of[savepoint])
    kept = fixture_files - _written_by_hudi(root, savepoint)
    # The latest slice of every file group as of the savepoint: what reads as of it need.
    pinned = {
        f
        for by_base in _slices(root, only=kept).values()
        for f in by_base[max(b for b in by_base if b <= savepoint)]
    }
    assert table.savepoint(savepoint) == savepoint
    assert table.savepoints() == [savepoint]

    rows = model.fixture
    model.upsert(table, model.later(rows.slice(0, 1), 10))
    model.delete(table, rows.slice(rows.num_rows - 1, 1))
    if table.table_type == "MERGE_ON_READ":
        assert len(table.compact()) == 1
    model.upsert(table, model.later(rows.slice(0, 1), 20))
    table.clean(options={"hoodie.cleaner.commits.retained": "1"})
    assert pinned <= data_files(str(root)), "the savepoint keeps its slices from the cleaner"
    _crash_completing(monkeypatch, Action.COMMIT, Action.DELTA_COMMIT)
    with pytest.raises(OSError, match="killed"):
        table.upsert(model.later(rows.slice(0, 1), 30))
    monkeypatch.undo()

    restore = table.restore(savepoint)

    assert model.canonical(table.read()) == as_of
    assert model.canonical(hudi_rs_read(table.path)) == as_of
    assert pinned <= data_files(str(root)) <= kept
    timeline = Timeline.load(table.storage, table.config)
    assert [i.requested_time for i in timeline.completed_data_instants()] == [
        i for i in hudi_instants if i <= savepoint
    ]
    assert timeline.pending() == []
    assert timeline.get(restore) is not None and timeline.get(restore).action == Action.RESTORE
    # A write after the restore, read back by hudi-rs.
    model.rows = dict(model.as_of[savepoint])
    model.upsert(table, model.later(rows.slice(0, 1), 40))
    assert model.canonical(table.read()) == model.expected()
    assert model.canonical(hudi_rs_read(table.path)) == model.expected()


# ---- rollback of crashed writes ------------------------------------------------------------


def _new_rollbacks(root: Path, before: set[str]) -> list[str]:
    return sorted(
        p.name.split(".")[0]
        for p in (root / ".hoodie").glob("*.rollback")
        if p.name.split(".")[0] not in before
    )


def test_a_crashed_append_to_hudis_log_file_is_rolled_back_as_hudi_plans_it(tmp_path, monkeypatch):
    """The fixture's file group holds Hudi's logs, one of them neutralised by Hudi's own
    rollback. A shoal upsert appends to Hudi's latest log file and dies before it commits; the
    next write rolls it back with a plan a Java writer could resume: one request per log file
    appended to, naming its file group, slice and size, as the plan Hudi wrote does."""
    root = _unzip(tmp_path, "mor_parquet_v6_nonpartitioned_rollback")
    table, model = _open(root)
    hudi_rollbacks = {p.name.split(".")[0] for p in (root / ".hoodie").glob("*.rollback")}
    hudi_log = next(f for f in data_files(str(root)) if ".log.3_" in f)
    size_before = (root / hudi_log).stat().st_size
    rows = model.fixture

    _crash_completing(monkeypatch, Action.DELTA_COMMIT)
    with pytest.raises(OSError, match="killed"):
        table.upsert(model.later(rows.slice(0, 1), 10))
    monkeypatch.undo()
    size_failed = (root / hudi_log).stat().st_size
    assert size_failed > size_before, "the failed write appended to Hudi's log file"
    _check(table, model, "a crashed append")

    model.upsert(table, model.later(rows.slice(1, 1), 20))
    _check(table, model, "the next write")

    (rollback,) = _new_rollbacks(root, hudi_rollbacks)
    ours = _hudi_read(root / ".hoodie" / f"{rollback}.rollback.requested", "rollback.requested")
    (theirs_time,) = hudi_rollbacks
    theirs = _hudi_read(root / ".hoodie" / f"{theirs_time}.rollback.requested", "rollback.requested")
    hudi_append = next(r for r in theirs["RollbackRequests"] if r["logBlocksToBeDeleted"])
    (request,) = [r for r in ours["RollbackRequests"] if r["logBlocksToBeDeleted"]]
    assert set(request) == set(hudi_append)
    file_id, base = hudi_log.split("_")[0].lstrip("."), hudi_log.split("_")[1].split(".")[0]
    assert (request["partitionPath"], request["fileId"], request["latestBaseInstant"]) == ("", file_id, base)
    assert request["filesToBeDeleted"] == []
    ((path, size),) = request["logBlocksToBeDeleted"].items()
    assert Path(path).name == Path(hudi_log).name and size == size_failed
    assert all(r["filesToBeDeleted"] == [] for r in ours["RollbackRequests"])

    metadata = _hudi_read(root / ".hoodie" / f"{rollback}.rollback", "rollback")
    (partition,) = metadata["partitionMetadata"].values()
    assert [Path(p).name for p in partition["logFilesFromFailedCommit"]] == [Path(hudi_log).name]
    assert [Path(p).name for p in partition["rollbackLogFiles"]] == [Path(hudi_log).name]
    hudi_metadata = _hudi_read(root / ".hoodie" / f"{theirs_time}.rollback", "rollback")
    assert set(metadata) == set(hudi_metadata)
    assert metadata["instantsRollback"] == [
        {"commitTime": metadata["commitsRollback"][0], "action": "deltacommit"}
    ]


def test_a_crashed_merge_into_a_hudi_copy_on_write_table_is_rolled_back(tmp_path, monkeypatch):
    root = _unzip(tmp_path, "cow_v6_complexkeygen_hivestyle")
    table, model = _open(root)
    before = data_files(str(root))
    rows = model.fixture
    _crash_completing(monkeypatch, Action.COMMIT)
    with pytest.raises(OSError, match="killed"):
        table.upsert(model.later(rows.slice(0, 2), 10))
    monkeypatch.undo()
    created = data_files(str(root)) - before
    assert created
    _check(table, model, "a crashed merge")

    written = model.upsert(table, model.later(rows.slice(2, 1), 20))
    _check(table, model, "the next write")
    assert not created & data_files(str(root))
    timeline = Timeline.load(table.storage, table.config)
    assert data_files(str(root)) == before | {s.path for s in timeline.commit_metadata(written).write_stats()}
    (rollback,) = _new_rollbacks(root, set())
    plan = _hudi_read(root / ".hoodie" / f"{rollback}.rollback.requested", "rollback.requested")
    planned = {p for r in plan["RollbackRequests"] for p in r["filesToBeDeleted"]}
    assert planned == {str(root / f) for f in created}


# ---- the timeline files the services write -------------------------------------------------


def test_service_timeline_files_read_with_hudis_schemas_and_hold_what_hudi_fills(tmp_path):
    """Compaction plan, clean plan and metadata, savepoint, rollback, restore plan and metadata
    and the archive, written by shoal's services on a table Hudi wrote: each resolves against
    Hudi's reader schema, and holds the values worked out from the table's files."""
    root = _unzip(tmp_path, "mor_parquet_v6_simplekeygen_nonhivestyle")
    table, model = _open(root)
    hoodie = root / ".hoodie"
    rows = model.fixture
    model.upsert(table, model.later(rows.slice(0, 4), 10))  # a log in every file group
    with_logs = {
        group: (min(by_base), sorted(f for f in by_base[min(by_base)] if ".log." in f))
        for group, by_base in _slices(root).items()
    }

    compaction = table.schedule_compaction()
    assert compaction is not None
    plan = _hudi_read(hoodie / f"{compaction}.compaction.requested", "compaction.requested")
    assert plan["version"] == 2
    operations = {(op["partitionPath"], op["fileId"]): op for op in plan["operations"]}
    assert set(operations) == {g for g, (_, logs) in with_logs.items() if logs}
    for group, op in operations.items():
        base, logs = with_logs[group]
        (base_file,) = [f for f in _slices(root)[group][base] if f.endswith(".parquet")]
        assert op["baseInstantTime"] == base and op["dataFilePath"] == Path(base_file).name
        assert op["deltaFilePaths"] == [Path(f).name for f in logs]
        assert op["metrics"]["TOTAL_LOG_FILES"] == len(logs)
        assert op["metrics"]["TOTAL_LOG_FILES_SIZE"] == sum((root / f).stat().st_size for f in logs)
    assert (hoodie / f"{compaction}.compaction.inflight").exists() is False
    table.run_compaction(compaction)
    assert (hoodie / f"{compaction}.compaction.inflight").read_bytes() == b""
    model.as_of[compaction] = dict(model.rows)
    last = model.upsert(table, model.later(rows.slice(0, 1), 20))

    savepoint = table.savepoint(compaction)
    record = _hudi_read(hoodie / f"{savepoint}.savepoint", "savepoint")
    assert record["savepointedBy"] is not None and record["savepointedAt"] > 0
    pinned = {Path(f).name for s in record["partitionMetadata"].values() for f in s["savepointDataFile"]}
    assert {Path(f).name for f in data_files(str(root)) if f.endswith(f"_{compaction}.parquet")} <= pinned
    assert (hoodie / f"{savepoint}.savepoint.inflight").read_bytes() == b""

    # 1 retained of 5 commits: the earliest commit to retain is the last delta commit; Hudi's
    # slices of the compacted file groups go (the compaction's is the last one before it).
    before = data_files(str(root))
    (clean,) = table.clean(options={"hoodie.cleaner.commits.retained": "1"})
    deleted = before - data_files(str(root))
    assert deleted == {
        f
        for g in operations
        for b, fs in _slices(root, only=before)[g].items()
        if b != compaction
        for f in fs
    }
    plan = _hudi_read(hoodie / f"{clean}.clean.requested", "clean.requested")
    assert plan["earliestInstantToRetain"] == {
        "timestamp": last,
        "action": "deltacommit",
        "state": "COMPLETED",
    }
    assert plan["policy"] == "KEEP_LATEST_COMMITS" and plan["version"] == 2
    assert plan["filesToBeDeletedPerPartition"] == {} and plan["partitionsToBeDeleted"] == []
    planned = {i["filePath"] for infos in plan["filePathsToBeDeletedPerPartition"].values() for i in infos}
    assert planned == {str(root / f) for f in deleted}
    assert _hudi_read(hoodie / f"{clean}.clean.inflight", "clean.inflight") == plan
    metadata = _hudi_read(hoodie / f"{clean}.clean", "clean")
    assert metadata["startCleanTime"] == clean and metadata["version"] == 2
    assert metadata["earliestCommitToRetain"] == metadata["lastCompletedCommitTimestamp"] == last
    assert metadata["totalFilesDeleted"] == len(deleted)
    for partition, pm in metadata["partitionMetadata"].items():
        names = {Path(f).name for f in deleted if f.startswith(f"{partition}/")}
        assert pm["partitionPath"] == partition and pm["policy"] == "KEEP_LATEST_COMMITS"
        assert set(pm["deletePathPatterns"]) == set(pm["successDeleteFiles"]) == names
        assert pm["failedDeleteFiles"] == []

    rolled_back = table.rollback()
    (rollback,) = _new_rollbacks(root, set())
    assert rolled_back == rollback
    plan = _hudi_read(hoodie / f"{rollback}.rollback.requested", "rollback.requested")
    assert plan["instantToRollback"] == {"commitTime": last, "action": "deltacommit"}
    metadata = _hudi_read(hoodie / f"{rollback}.rollback", "rollback")
    assert metadata["commitsRollback"] == [last] and metadata["startRollbackTime"] == rollback
    assert (hoodie / f"{rollback}.rollback.inflight").read_bytes() == b""
    model.rows = dict(model.as_of[compaction])

    after = [model.upsert(table, model.later(rows.slice(1, 2), 30)), model.delete(table, rows.slice(3, 1))]
    restore = table.restore(savepoint)
    plan = _hudi_read(hoodie / f"{restore}.restore.requested", "restore.requested")
    assert plan["instantsToRollback"] == [{"commitTime": i, "action": "deltacommit"} for i in reversed(after)]
    assert plan["savepointToRestoreTimestamp"] == savepoint
    metadata = _hudi_read(hoodie / f"{restore}.restore", "restore")
    assert metadata["startRestoreTime"] == restore
    assert metadata["instantsToRollback"] == list(reversed(after))
    assert metadata["restoreInstantInfo"] == plan["instantsToRollback"]
    assert set(metadata["hoodieRestoreMetadata"]) == set(after)
    for instant, rollbacks in metadata["hoodieRestoreMetadata"].items():
        (one,) = rollbacks
        assert one["commitsRollback"] == [instant]
    assert model.canonical(table.read()) == model.expected(model.as_of[savepoint])


def _archive_entries(path: Path) -> list[dict]:
    """The records of the AVRO_DATA blocks of an archive file, with each block's own schema."""
    data, out, at = path.read_bytes(), [], 0
    while at < len(data):
        assert data[at : at + 6] == b"#HUDI#"
        size = struct.unpack(">q", data[at + 6 : at + 14])[0]
        block = io.BytesIO(data[at + 14 : at + 14 + size])
        _version, block_type = struct.unpack(">ii", block.read(8))
        header = {}
        for _ in range(struct.unpack(">i", block.read(4))[0]):
            key, length = struct.unpack(">ii", block.read(8))
            header[key] = block.read(length).decode()
        content = io.BytesIO(block.read(struct.unpack(">q", block.read(8))[0]))
        assert block_type == 3  # AVRO_DATA_BLOCK
        schema = fastavro.parse_schema(json.loads(header[2]))
        _, count = struct.unpack(">ii", content.read(8))
        for _ in range(count):
            record = content.read(struct.unpack(">i", content.read(4))[0])
            out.append(fastavro.schemaless_reader(io.BytesIO(record), schema, None))
        at += 14 + size
    return out


def test_the_archive_holds_every_state_file_of_hudis_instants(tmp_path):
    """Archival takes Hudi's instants off the active timeline into one archive entry per state
    file, the completed ones with the metadata Hudi wrote (converted to Avro)."""
    root = _unzip(tmp_path, "mor_parquet_v6_nonpartitioned_rollback")
    table, model = _open(root)
    hoodie = root / ".hoodie"
    state_files = sorted(p.name for p in hoodie.iterdir() if p.name[:1].isdigit())
    commits = {
        n.split(".")[0]: json.loads((hoodie / n).read_text())
        for n in state_files
        if n.endswith(".deltacommit")
    }
    for k in range(5):
        model.upsert(table, model.later(model.fixture.slice(0, 1), 10 * (k + 1)))
    result = table.archive(
        options={
            "hoodie.keep.min.commits": "2",
            "hoodie.keep.max.commits": "3",
            "hoodie.cleaner.commits.retained": "1",
        }
    )
    archived = {i.requested_time for i in result.archived}
    assert set(commits) <= archived
    (archive,) = (hoodie / "archived").glob(".commits_.archive.*")
    entries = _archive_entries(archive)
    keys = {(e["commitTime"], e["actionType"], e["actionState"]) for e in entries}
    states = {"requested": "REQUESTED", "inflight": "INFLIGHT"}
    for name in state_files:
        instant, _, ext = name.partition(".")
        action, _, state = ext.partition(".")
        if instant in archived:
            assert (instant, action, states.get(state, "COMPLETED")) in keys, name
            assert not (hoodie / name).exists(), name
    for entry in entries:
        original = commits.get(entry["commitTime"])
        if original is None or entry["actionState"] != "COMPLETED":
            continue
        metadata = entry["hoodieCommitMetadata"]
        assert metadata["operationType"] == original["operationType"]
        assert metadata["extraMetadata"] == original["extraMetadata"]
        paths = {p: sorted(s["path"] for s in ss) for p, ss in metadata["partitionToWriteStats"].items()}
        assert paths == {
            p: sorted(s["path"] for s in ss) for p, ss in original["partitionToWriteStats"].items()
        }
    assert model.canonical(table.read()) == model.expected()
    assert model.canonical(hudi_rs_read(table.path)) == model.expected()


# ---- the cleaner's choices, by Hudi's rules -------------------------------------------------

# mor_parquet_v6_simplekeygen_nonhivestyle: Hudi's commit H1 wrote file groups A (partition 10)
# and B (partition 20); H2 appended a log to A's slice H1 and wrote a file group in partition 30.
GROUP_A, GROUP_B = "26e33b7b-aa9f-4f2e-b683-a90ef0d5861d-0", "b2506c0e-8ddb-48c0-a683-a1d7d13cae0f-0"
H1 = "20250121000547796"


@pytest.fixture(scope="module")
def cleaner_table(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str], Model]:
    """The fixture after shoal's S1 (an update logged to A's slice H1), C1 (compaction of A),
    S2 (an update logged to A's slice C1), C2 (compaction of A) and S3 (an update logged to B's
    slice H1): A has slices H1, C1 and C2, B has slice H1 with a log. Completed commits: H1, H2,
    S1, C1, S2, C2, S3."""
    root = _unzip(tmp_path_factory.mktemp("cleaner"), "mor_parquet_v6_simplekeygen_nonhivestyle")
    table, model = _open(root)
    by_key = {r[KEY]: model.fixture.slice(i, 1) for i, r in enumerate(model.fixture.to_pylist())}
    instants = {"S1": model.upsert(table, model.later(by_key["3"], 10))}
    (instants["C1"],) = table.compact()
    instants["S2"] = model.upsert(table, model.later(by_key["1"], 10))
    (instants["C2"],) = table.compact()
    instants["S3"] = model.upsert(table, model.later(by_key["2"], 10))
    slices = _slices(root)
    assert sorted(slices[("10", GROUP_A)]) == [H1, instants["C1"], instants["C2"]]
    assert sorted(slices[("20", GROUP_B)]) == [H1]
    return root, instants, model


CLEANS = [
    # (policy options, "now" as hours after an instant, slices removed: (group, base))
    (
        {"hoodie.cleaner.policy": "KEEP_LATEST_FILE_VERSIONS", "hoodie.cleaner.fileversions.retained": "1"},
        None,
        {("A", "H1"), ("A", "C1")},
    ),
    (
        {"hoodie.cleaner.policy": "KEEP_LATEST_FILE_VERSIONS", "hoodie.cleaner.fileversions.retained": "2"},
        None,
        {("A", "H1")},
    ),
    (
        {"hoodie.cleaner.policy": "KEEP_LATEST_FILE_VERSIONS", "hoodie.cleaner.fileversions.retained": "3"},
        None,
        set(),
    ),
    # ECTR = S3: A keeps its latest slice C2, which is also the last one before S3.
    ({"hoodie.cleaner.commits.retained": "1"}, None, {("A", "H1"), ("A", "C1")}),
    # ECTR = C2: A keeps C2 and the last slice before it, C1.
    ({"hoodie.cleaner.commits.retained": "2"}, None, {("A", "H1")}),
    # ECTR = C1: A keeps C2, C1 and the last slice before C1, H1.
    ({"hoodie.cleaner.commits.retained": "4"}, None, set()),
    # 7 commits, 7 retained: no ECTR yet.
    ({"hoodie.cleaner.commits.retained": "7"}, None, set()),
    (
        {"hoodie.cleaner.policy": "KEEP_LATEST_BY_HOURS", "hoodie.cleaner.hours.retained": "1"},
        "S3",
        {("A", "H1"), ("A", "C1")},
    ),
    (
        {"hoodie.cleaner.policy": "KEEP_LATEST_BY_HOURS", "hoodie.cleaner.hours.retained": "1"},
        "C2",
        {("A", "H1")},
    ),
    ({"hoodie.cleaner.policy": "KEEP_LATEST_BY_HOURS", "hoodie.cleaner.hours.retained": "2"}, "S1", set()),
]


def _slice_files(slices: dict, instants: dict[str, str], removed: set[tuple[str, str]]) -> set[str]:
    groups = {"A": ("10", GROUP_A), "B": ("20", GROUP_B)}
    return {f for g, b in removed for f in slices[groups[g]][instants.get(b, H1)]}


@pytest.mark.parametrize(("options", "hours_after", "removed"), CLEANS)
def test_the_cleaner_removes_the_slices_hudis_rules_remove(
    tmp_path, cleaner_table, options, hours_after, removed
):
    prepared, instants, model = cleaner_table
    root = tmp_path / prepared.name
    shutil.copytree(prepared, root)
    table = shoal.Table(str(root), options=QUIET)
    slices = _slices(root)
    before = data_files(str(root))
    clock = None
    if hours_after is not None:
        hours = int(options["hoodie.cleaner.hours.retained"])
        moment = parse_instant(instants[hours_after]) + _dt.timedelta(hours=hours)
        clock = lambda: moment  # noqa: E731

    done = clean_mod.clean(table.storage, table.config, WriteConfig({**QUIET, **options}), clock=clock)

    assert before - data_files(str(root)) == _slice_files(slices, instants, removed)
    assert len(done) == (1 if removed else 0)
    assert model.canonical(table.read()) == model.expected()
    assert model.canonical(hudi_rs_read(table.path)) == model.expected()


@pytest.mark.parametrize("policy", ["KEEP_LATEST_FILE_VERSIONS", "KEEP_LATEST_COMMITS"])
def test_the_cleaner_keeps_what_a_pending_compaction_and_a_savepoint_need(tmp_path, cleaner_table, policy):
    """A compaction planned over B's Hudi slice H1 keeps it (and counts as B's one version); a
    savepoint of C1 keeps A's slice C1."""
    prepared, instants, model = cleaner_table
    root = tmp_path / prepared.name
    shutil.copytree(prepared, root)
    table = shoal.Table(str(root), options=QUIET)
    slices = _slices(root)
    before = data_files(str(root))
    compaction = table.schedule_compaction()
    plan = Timeline.load(table.storage, table.config).compaction_plan(compaction)
    assert [(op["fileId"], op["baseInstantTime"]) for op in plan] == [(GROUP_B, H1)]
    table.savepoint(instants["C1"])

    options = {"hoodie.cleaner.policy": policy, "hoodie.cleaner.fileversions.retained": "1"}
    table.clean(options={**options, "hoodie.cleaner.commits.retained": "1"})

    assert before - data_files(str(root)) == _slice_files(slices, instants, {("A", "H1")})
    assert table.compact() == [compaction]
    assert model.canonical(table.read()) == model.expected()
    assert model.canonical(hudi_rs_read(table.path)) == model.expected()
    assert model.canonical(table.read(as_of=instants["C1"])) == model.expected(model.as_of[instants["S1"]])


# ---- services that must refuse, and a clean that fails -----------------------------------


def _pending_write_of_another_writer(root: Path, table: shoal.Table) -> str:
    """Another writer's delta commit, requested and inflight (its writer is still running)."""
    instant = Timeline.load(table.storage, table.config).new_instant_time()
    (root / ".hoodie" / f"{instant}.deltacommit.requested").write_bytes(b"")
    (root / ".hoodie" / f"{instant}.deltacommit.inflight").write_bytes(b"")
    return instant


def test_services_refuse_with_typed_errors_and_change_nothing(tmp_path):
    root = _unzip(tmp_path, "mor_avro_v6_trips_8i1u")
    table, model = _open(root)
    hudi_instants = _completed_data_instants(table)
    written = model.upsert(table, model.later(model.fixture.slice(0, 2), 10))
    other = _pending_write_of_another_writer(root, table)
    files = file_digests(root)

    def refused(error: type[Exception], call: Callable[[], Any]) -> None:
        with pytest.raises(error):
            call()
        assert file_digests(root) == files
        assert model.canonical(table.read()) == model.expected()

    # A compaction must be later than every pending write, which would leave its logs behind.
    refused(CommitConflictError, table.schedule_compaction)
    refused(CommitConflictError, table.compact)
    # Compaction of an instant that is not a pending compaction.
    for instant in (written, hudi_instants[0], other, "20990101000000000"):
        refused(InstantNotFoundError, lambda i=instant: table.run_compaction(i))
    # Restore to an instant that is not a savepoint; savepoints of what is not a completed commit.
    refused(InstantNotFoundError, lambda: table.restore(hudi_instants[0]))
    refused(InstantNotFoundError, lambda: table.savepoint(other))
    refused(InstantNotFoundError, lambda: table.delete_savepoint(hudi_instants[0]))
    # A clean and an archival leave the pending write's instant, and what it may read, alone.
    table.clean(options={"hoodie.cleaner.commits.retained": "1"})
    table.archive(
        options={
            "hoodie.keep.min.commits": "2",
            "hoodie.keep.max.commits": "3",
            "hoodie.cleaner.commits.retained": "1",
        }
    )
    timeline = Timeline.load(table.storage, table.config)
    assert [i.requested_time for i in timeline.pending()] == [other]
    assert [i.requested_time for i in timeline.completed_data_instants()] == [*hudi_instants, written]
    assert file_digests(root) == files

    cow = shoal.Table(str(_unzip(tmp_path / "cow", "cow_v6_nonpartitioned")), options=QUIET)
    cow_files = file_digests(Path(cow.path))
    with pytest.raises(InvalidArgumentError):
        cow.schedule_compaction()
    no_meta = shoal.Table(
        str(_unzip(tmp_path / "no_meta", "mor_parquet_v6_simplekeygen_hivestyle_no_metafields"))
    )
    no_meta_files = file_digests(Path(no_meta.path))
    with pytest.raises(UnsupportedError):
        no_meta.compact()
    assert file_digests(Path(cow.path)) == cow_files and file_digests(Path(no_meta.path)) == no_meta_files


def test_a_clean_whose_delete_fails_stays_pending_and_the_next_clean_finishes_it(tmp_path, monkeypatch):
    """A delete the storage refuses (not a file already gone) fails the clean, as in Hudi: the
    clean stays pending and the next one deletes what is left, instead of completing the clean
    with Hudi's file left behind for good (no later plan names it again)."""
    root = _unzip(tmp_path, "mor_parquet_v6_simplekeygen_nonhivestyle")
    table, model = _open(root)
    by_key = {r[KEY]: model.fixture.slice(i, 1) for i, r in enumerate(model.fixture.to_pylist())}
    model.upsert(table, model.later(by_key["3"], 10))
    table.compact()
    model.upsert(table, model.later(by_key["3"], 20))
    slices = _slices(root)
    doomed = set(slices[("10", GROUP_A)][H1])
    refused = sorted(doomed)[0]
    real = Storage.delete

    def delete(self: Storage, rel: str, missing_ok: bool = False) -> None:
        if rel == refused:
            raise PermissionError(13, "Permission denied", rel)
        real(self, rel, missing_ok=missing_ok)

    monkeypatch.setattr(Storage, "delete", delete)
    with pytest.raises(PermissionError):
        table.clean(options={"hoodie.cleaner.commits.retained": "1"})
    monkeypatch.undo()
    (pending,) = Timeline.load(table.storage, table.config).pending()
    assert pending.action == Action.CLEAN
    assert (root / refused).exists()
    assert model.canonical(table.read()) == model.expected()

    assert table.clean(options={"hoodie.cleaner.commits.retained": "1"}) == [pending.requested_time]
    assert not doomed & data_files(str(root))
    metadata = _hudi_read(root / ".hoodie" / f"{pending.requested_time}.clean", "clean")
    (pm,) = metadata["partitionMetadata"].values()
    # The files the failed attempt deleted are gone already: Hudi reports those as failed.
    assert (
        Path(refused).name in pm["successDeleteFiles"] and Path(refused).name not in pm["failedDeleteFiles"]
    )
    assert set(pm["successDeleteFiles"]) | set(pm["failedDeleteFiles"]) == {Path(f).name for f in doomed}
    assert model.canonical(table.read()) == model.expected()
    assert model.canonical(hudi_rs_read(table.path)) == model.expected()


def test_hudis_rolled_back_log_block_stays_out_once_its_instant_is_older_than_the_timeline(tmp_path):
    """The fixture's first log file holds the data block of a write Hudi rolled back (with a
    command block in the next log file). Once archival takes Hudi's instants off the active
    timeline, that block's instant is older than the first active one, which readers take as
    committed: only the command block keeps it out, of snapshot reads and of the compaction."""
    root = _unzip(tmp_path, "mor_parquet_v6_nonpartitioned_rollback")
    table, model = _open(root)
    hudi_instants = _completed_data_instants(table)
    for k in range(7):  # new records, one delta commit each, in new file groups
        row = model.fixture.slice(0, 1).select(model.columns[1:])
        row = row.set_column(row.column_names.index("id"), "id", pa.array([1000 + k], pa.int32()))
        instant = table.insert(row)
        model.rows[str(1000 + k)] = {KEY: str(1000 + k), COMMIT_TIME: instant, **row.to_pylist()[0]}
        model.as_of[instant] = dict(model.rows)
    result = table.archive(
        options={
            "hoodie.keep.min.commits": "2",
            "hoodie.keep.max.commits": "3",
            "hoodie.cleaner.commits.retained": "1",
        }
    )
    assert set(hudi_instants) <= {i.requested_time for i in result.archived}
    _check(table, model, "archival of Hudi's instants")
    assert len(table.compact()) == 1
    _check(table, model, "compaction")
    assert model.canonical(table.read(query_type="read_optimized")) == model.expected()


@pytest.mark.parametrize(
    ("options", "write_first", "removed"),
    [
        # File versions: a replaced file group goes whole at once.
        ({"hoodie.cleaner.policy": "KEEP_LATEST_FILE_VERSIONS"}, False, "replaced"),
        # ECTR = Hudi's replace commit itself: its groups are not older than the ECTR, so they
        # stay whole, and replaced groups are no active file groups either (Hudi's
        # getAllFileGroupsStateless leaves them out): even the older version of the group the
        # second commit rewrote stays.
        ({"hoodie.cleaner.commits.retained": "1"}, False, "nothing"),
        # ECTR = a later shoal commit: the replace commit is older, its groups go whole.
        ({"hoodie.cleaner.commits.retained": "1"}, True, "replaced"),
    ],
)
def test_the_cleaner_removes_the_file_groups_hudis_replace_commit_replaced(
    tmp_path, options, write_first, removed
):
    """cow_v6_simplekeygen_nonhivestyle_overwritetable: two commits (the second rewrote the
    group of partition 10), then Hudi's insert_overwrite_table replaced all three groups."""
    root = _unzip(tmp_path, "cow_v6_simplekeygen_nonhivestyle_overwritetable")
    table, model = _open(root)
    replaced = _replaced_by_hudi(root)
    slices = _slices(root)
    if write_first:
        model.upsert(table, model.later(model.fixture.slice(0, 1), 10))
    before = data_files(str(root))

    table.clean(options={**options, "hoodie.cleaner.fileversions.retained": "1"})

    expected = set()
    if removed == "replaced":
        expected = {f for g in replaced for files in slices[g].values() for f in files}
    assert [g for g, by_base in slices.items() if len(by_base) == 2] == [
        ("10", "4f2685a3-614f-49ca-9b2b-e1cb9fb61f27-0")
    ]
    assert before - data_files(str(root)) == expected
    assert model.canonical(table.read()) == model.expected()
    assert model.canonical(hudi_rs_read(table.path)) == model.expected()
