"""Incremental reads (``Table.read_incremental``) against a model of what each commit changed,
against hudi-rs's incremental query on the same tables and on Apache Hudi's fixtures, and
proofs that a read of a small commit touches only the file groups it wrote."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pytest
from hudi import HudiQueryType, HudiReadOptions, HudiTableBuilder

import shoal
from shoal.errors import InstantNotFoundError, InvalidArgumentError, UnsupportedError
from shoal.read import incremental
from shoal.read.incremental import predecessor
from tests.hudi_oracle import hudi_rs_read
from tests.test_fixtures import ALL_FIXTURES

Key = tuple[str, int]


# ---- the model --------------------------------------------------------------------------------


@dataclass
class Model:
    """What the table holds after each commit, and which keys each commit deleted."""

    event_time: bool = False
    rows: dict[Key, dict] = field(default_factory=dict)
    states: dict[str, dict[Key, dict]] = field(default_factory=dict)
    deleted_at: dict[str, dict[Key, dict]] = field(default_factory=dict)
    instants: list[str] = field(default_factory=list)

    def upsert(self, instant: str, records: list[dict]) -> None:
        gone = {}
        for r in records:
            k = (r["p"], r["id"])
            cur = self.rows.get(k)
            if self.event_time and cur is not None and cur["ts"] > r["ts"]:
                continue  # a late event loses against the stored version
            if r.get("_hoodie_is_deleted"):
                if cur is not None:
                    gone[k] = self.rows.pop(k)
                continue
            self.rows[k] = {"id": r["id"], "p": r["p"], "ts": r["ts"], "v": r["v"], "t": instant}
        self._commit(instant, gone)

    def delete(self, instant: str, keys: list[Key]) -> None:
        self._commit(instant, {k: self.rows.pop(k) for k in keys if k in self.rows})

    def _commit(self, instant: str, gone: dict[Key, dict]) -> None:
        self.instants.append(instant)
        self.states[instant] = {k: dict(v) for k, v in self.rows.items()}
        self.deleted_at[instant] = gone

    def state_at(self, bound: str | None) -> dict[Key, dict]:
        done = [t for t in self.instants if bound is None or t <= bound]
        return self.states[done[-1]] if done else {}

    def changes(self, lo: str | None, hi: str | None) -> tuple[dict, dict]:
        """(changed rows, deleted keys -> (deleting instant, last row image)) of ``(lo, hi]``."""
        in_range = [t for t in self.instants if (lo is None or t > lo) and (hi is None or t <= hi)]
        end = self.state_at(hi)
        changed = {k: (r["t"], r["v"], r["ts"]) for k, r in end.items() if r["t"] in in_range}
        deleted: dict[Key, tuple] = {}
        for t in in_range:
            for k, r in self.deleted_at[t].items():
                deleted[k] = (t, r["v"], r["ts"])
        return changed, {k: v for k, v in deleted.items() if k not in end}


def _rows(n: range, version: str, ts: int = 1) -> list[dict]:
    return [{"id": i, "p": "abc"[i % 3], "ts": ts, "v": f"{version}-{i}"} for i in n]


def _arrow(records: list[dict]) -> pa.Table:
    cols = {c: [r[c] for r in records] for c in ("id", "p", "ts", "v")}
    return pa.table({**cols, "_hoodie_is_deleted": [bool(r.get("_hoodie_is_deleted")) for r in records]})


def _build(path: Path, table_type: str) -> tuple[shoal.Table, Model]:
    """A table and its model after eight commits: inserts, updates (base rewrites and, on MOR,
    log appends), hard and soft deletes, a re-insert of a deleted key."""
    table = shoal.Table.create(path, "inc", table_type=table_type, record_key="id", partition_by="p")
    model = Model()

    def upsert(records: list[dict], op: str = "upsert") -> None:
        model.upsert(getattr(table, op)(_arrow(records)), records)

    def delete(keys: list[int]) -> None:
        ks = [("abc"[i % 3], i) for i in keys]
        model.delete(table.delete(pa.table({"id": [k[1] for k in ks], "p": [k[0] for k in ks]})), ks)

    upsert(_rows(range(40), "c1"))
    upsert(_rows(range(10), "c2") + _rows(range(40, 45), "c2"))
    delete(list(range(10, 15)))
    upsert(_rows(range(50, 55), "c4"), op="insert")
    upsert(_rows(range(20, 24), "c5"))  # updates only: log appends on MOR
    delete([0, 40, 21])
    upsert(_rows(range(10, 12), "c7") + [dict(r, _hoodie_is_deleted=True) for r in _rows(range(1, 4), "c7")])
    upsert(_rows(range(22, 26), "c8"))
    return table, model


def _ours(table: shoal.Table, lo: str | None, hi: str | None) -> tuple[dict, dict]:
    out = table.read_incremental(lo, hi, include_deletes=True)
    changed, deleted = {}, {}
    for r in out.to_pylist():
        k = (r["p"], r["id"])
        target = deleted if r["_hoodie_is_deleted"] else changed
        assert k not in changed and k not in deleted, f"key {k} twice"
        target[k] = (r["_hoodie_commit_time"], r["v"], r["ts"])
    return changed, deleted


def _bounds(instants: list[str]) -> list[str | None]:
    """Range bounds: none, before the first instant, every instant, and between instants."""
    mids = [predecessor(t) for t in instants[1:] if predecessor(t) not in instants]
    return [None, "0", predecessor(instants[0]), *instants, *mids, "99991231235959999"]


@pytest.fixture(scope="module", params=["COPY_ON_WRITE", "MERGE_ON_READ"])
def built(request, tmp_path_factory):
    table, model = _build(tmp_path_factory.mktemp("inc") / "t", request.param)
    return table, model


def test_every_range_matches_the_model(built):
    table, model = built
    bounds = _bounds(model.instants)
    checked = 0
    for lo in bounds:
        for hi in bounds:
            if lo is not None and hi is not None and hi <= lo:
                continue
            assert _ours(table, lo, hi) == model.changes(lo, hi), (lo, hi)
            checked += 1
    assert checked > 100


def test_single_instants_and_empty_ranges(built):
    table, model = built
    for prev, t in zip([None, *model.instants], model.instants, strict=False):
        changed, deleted = model.changes(prev, t)
        assert _ours(table, prev, t) == (changed, deleted)
        assert changed or deleted  # every commit of the workload changed something
    schema_names = table.schema().names
    last = model.instants[-1]
    for lo, hi in [(last, None), (last, last), (model.instants[3], model.instants[2]), ("0", "1")]:
        out = table.read_incremental(lo, hi)
        assert out.num_rows == 0
        assert out.column_names == schema_names
    # The workload writes _hoodie_is_deleted as a data column (soft deletes): it holds the marker.
    assert schema_names[-1] == "_hoodie_is_deleted"
    assert table.read_incremental(last, include_deletes=True).column_names == schema_names


def test_without_deletes_columns_and_filters(built):
    table, model = built
    lo, hi = model.instants[1], model.instants[6]
    changed, _ = model.changes(lo, hi)
    out = table.read_incremental(lo, hi)
    assert out.column_names == table.schema().names
    assert {
        (r["p"], r["id"]): (r["_hoodie_commit_time"], r["v"], r["ts"]) for r in out.to_pylist()
    } == changed
    assert out["_hoodie_commit_time"].to_pylist() == sorted(out["_hoodie_commit_time"].to_pylist())

    slim = table.read_incremental(lo, hi, columns=["id", "v"])
    assert slim.column_names == ["_hoodie_commit_time", "id", "v"]
    filtered = table.read_incremental(lo, hi, columns=["id"], filters=[("p", "=", "b"), ("id", ">", 20)])
    assert sorted(filtered["id"].to_pylist()) == sorted(k[1] for k in changed if k[0] == "b" and k[1] > 20)
    with_deletes = table.read_incremental(lo, hi, columns=["v"], include_deletes=True)
    assert with_deletes.column_names == [
        "_hoodie_commit_time",
        "_hoodie_record_key",
        "_hoodie_partition_path",
        "v",
        "_hoodie_is_deleted",
    ]


def test_bad_bounds_are_rejected(built):
    table, _ = built
    with pytest.raises(InvalidArgumentError):
        table.read_incremental("yesterday")


def test_applying_changes_to_a_copy_reproduces_the_table(built, tmp_path):
    """A downstream copy loaded as of one instant and fed the incremental output (deletes
    included) through a plain upsert ends equal to the source."""
    table, model = built
    mid = model.instants[2]
    copy = shoal.Table.create(tmp_path / "copy", "copy", record_key="id", partition_by="p")
    copy.upsert(table.read(as_of=mid, columns=["id", "p", "ts", "v"]))
    copy.upsert(table.read_incremental(mid, include_deletes=True))
    key = ["p", "id"]
    want = table.read(columns=["id", "p", "ts", "v"]).sort_by([(c, "ascending") for c in key])
    got = copy.read(columns=["id", "p", "ts", "v"]).sort_by([(c, "ascending") for c in key])
    assert got.to_pylist() == want.to_pylist()


# ---- hudi-rs ----------------------------------------------------------------------------------


def hudi_rs_incremental(path: str, start: str | None, end: str | None) -> pa.Table:
    options = HudiReadOptions().with_query_type(HudiQueryType.Incremental)
    if start is not None:
        options = options.with_start_timestamp(start)
    if end is not None:
        options = options.with_end_timestamp(end)
    batches = HudiTableBuilder.from_base_uri(path).build().read(options)
    return pa.Table.from_batches(batches) if batches else pa.table({})


def _changed_keys(table: pa.Table) -> list[tuple[str, str, str]]:
    if table.num_rows == 0:
        return []
    cols = ["_hoodie_commit_time", "_hoodie_partition_path", "_hoodie_record_key"]
    return sorted(zip(*(table[c].to_pylist() for c in cols), strict=True))


def test_ranges_match_hudi_rs_on_tables_we_write(built):
    table, model = built
    bounds = [None, *model.instants]
    for i, lo in enumerate(bounds):
        for hi in bounds[i + 1 :]:
            theirs = _changed_keys(hudi_rs_incremental(table.path, lo, hi))
            assert _changed_keys(table.read_incremental(lo, hi)) == theirs, (lo, hi)


def test_late_event_on_mor_diverges_from_hudi_rs(tmp_path):
    """Event-time ordering on MOR: an update whose ordering value is older than the stored one
    loses the merge. hudi-rs merges only the range's log blocks with the base rows of the range,
    so it reports the losing record as a change; shoal merges the whole slice and reports only
    what the table now holds (the model)."""
    table = shoal.Table.create(
        tmp_path / "t",
        "late",
        table_type="MERGE_ON_READ",
        record_key="id",
        partition_by="p",
        ordering_field="ts",
    )
    model = Model(event_time=True)
    for records in (_rows(range(6), "c1", ts=5), _rows(range(3), "c2", ts=9), _rows(range(4), "c3", ts=7)):
        model.upsert(table.upsert(_arrow(records)), records)
    for lo, hi in zip([None, *model.instants], model.instants, strict=False):
        assert _ours(table, lo, hi) == model.changes(lo, hi)
    lo, hi = model.instants[1], model.instants[2]
    ours = _changed_keys(table.read_incremental(lo, hi))
    theirs = _changed_keys(hudi_rs_incremental(table.path, lo, hi))
    assert sorted(k[2] for k in ours) == ["3"]  # ids 0-2 lost against c2's ts=9
    assert sorted(k[2] for k in theirs) == ["0", "1", "2", "3"]


# ---- Apache Hudi fixtures ---------------------------------------------------------------------

META_FIXTURES = [n for n in ALL_FIXTURES if "no_metafields" not in n]


def _data_instants(table: shoal.Table) -> list[tuple[str, str, str]]:
    """(requested time, position on the incremental axis, action) of every data instant."""
    v8 = table.config.table_version >= 8
    return [
        (t.time, (t.completion_time if v8 else None) or t.time, t.action)
        for t in table.timeline
        if t.action in ("commit", "deltacommit", "replacecommit", "compaction")
    ]


@pytest.mark.parametrize("name", META_FIXTURES)
def test_fixture_ranges_match_hudi_rs(fixture_table, name):
    path = str(fixture_table(name))
    table = shoal.Table(path)
    bounds = [None, *(k for _, k, _ in _data_instants(table))]
    for i, lo in enumerate(bounds):
        for hi in bounds[i + 1 :]:
            assert _changed_keys(table.read_incremental(lo, hi)) == _changed_keys(
                hudi_rs_incremental(path, lo, hi)
            ), (lo, hi)


@pytest.mark.parametrize("name", META_FIXTURES)
def test_fixture_deletes_match_hudi_rs_snapshots(fixture_table, name):
    """Per instant: the deleted keys are those of hudi-rs's snapshot before the instant that its
    snapshot at the instant lacks, and the changed rows are the snapshot's rows it wrote."""
    path = str(fixture_table(name))
    table = shoal.Table(path)
    before: set[tuple[str, str]] = set()
    prev_key = None
    for time, key, _ in _data_instants(table):
        snap = hudi_rs_read(path, as_of=time)
        now = {(p, k) for _, p, k in _changed_keys(snap)}
        out = table.read_incremental(prev_key, key, include_deletes=True)
        rows = out.to_pylist()
        deleted = {
            (r["_hoodie_partition_path"], r["_hoodie_record_key"]) for r in rows if r["_hoodie_is_deleted"]
        }
        changed = {
            (r["_hoodie_partition_path"], r["_hoodie_record_key"])
            for r in rows
            if not r["_hoodie_is_deleted"]
        }
        assert deleted == before - now, time
        written = {(p, k) for c, p, k in _changed_keys(snap) if c == time}
        assert changed == written, time
        assert {r["_hoodie_commit_time"] for r in rows} <= {time}
        before, prev_key = now, key


def test_fixture_without_meta_fields_is_unsupported(fixture_table):
    table = shoal.Table(fixture_table("cow_v6_simplekeygen_hivestyle_no_metafields"))
    with pytest.raises(UnsupportedError, match=r"populate\.meta\.fields"):
        table.read_incremental()


def test_v8_ranges_are_by_completion_time(fixture_table):
    path = str(fixture_table("mor_avro_v8_trips_8i3u1d"))
    table = shoal.Table(path)
    first = table.timeline[0]
    assert first.completion_time and first.completion_time > first.time
    # Up to the first instant's requested time nothing had completed yet.
    assert table.read_incremental(None, first.time).num_rows == 0
    assert table.read_incremental(None, first.completion_time).num_rows == 8


# ---- archived instants ------------------------------------------------------------------------


def test_range_reaching_into_archived_instants_fails(tmp_path):
    table = shoal.Table.create(tmp_path / "t", "arch", record_key="id", partition_by="p")
    times = [table.upsert(_arrow(_rows(range(i * 3, i * 3 + 3), f"c{i}"))) for i in range(3)]
    # Archive the first commit the way Hudi does: its instant files leave .hoodie/ and an
    # archive log appears (its content does not matter here).
    hoodie = Path(table.path) / ".hoodie"
    for f in hoodie.iterdir():
        if f.name.startswith(times[0]):
            f.unlink()
    (hoodie / "archived" / ".commits_.archive.1_1-0-1").write_bytes(b"#HUDI#")
    table = shoal.Table(table.path)
    for start in (None, "0", times[0], predecessor(predecessor(times[1]))):
        with pytest.raises(InstantNotFoundError, match=times[1]):
            table.read_incremental(start)
    out = table.read_incremental(predecessor(times[1]))
    assert set(out["_hoodie_commit_time"].to_pylist()) == set(times[1:])
    assert table.read_incremental(times[1])["_hoodie_commit_time"].to_pylist() == [times[2]] * 3


def test_without_archive_a_start_before_the_timeline_reads_everything(built):
    table, model = built
    assert _ours(table, "0", None) == _ours(table, None, None) == model.changes(None, None)


# ---- cost follows the change ------------------------------------------------------------------


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_small_commit_reads_only_its_file_groups(tmp_path, monkeypatch, table_type):
    table = shoal.Table.create(
        tmp_path / "t", "cost", table_type=table_type, record_key="id", partition_by="p"
    )
    n_parts = 12
    table.bulk_insert(
        pa.table({"id": range(600), "p": [f"p{i % n_parts}" for i in range(600)], "v": ["a"] * 600})
    )
    touched = ["p3", "p7"]
    ids = [i for i in range(600) if f"p{i % n_parts}" in touched][:10]
    prev = table.latest_instant()
    t = table.upsert(pa.table({"id": ids, "p": [f"p{i % n_parts}" for i in ids], "v": ["b"] * len(ids)}))
    assert len({s.file_id for s in table.file_slices()}) == n_parts

    slices, opened, listed = [], [], []
    real_base, real_mor = incremental.read_base_slice, incremental.read_mor_slice

    def base_spy(spec, storage=None):
        slices.append(spec)
        return real_base(spec, storage)

    def mor_spy(spec, storage=None):
        slices.append(spec)
        return real_mor(spec, storage)

    monkeypatch.setattr(incremental, "read_base_slice", base_spy)
    monkeypatch.setattr(incremental, "read_mor_slice", mor_spy)
    storage_cls = type(table.storage)
    real_open, real_list = storage_cls.open_input_file, storage_cls.list_files

    def open_spy(self, rel):
        opened.append(rel)
        return real_open(self, rel)

    def list_spy(self, rel, recursive=False):
        listed.append((rel, recursive))
        return real_list(self, rel, recursive)

    monkeypatch.setattr(storage_cls, "open_input_file", open_spy)
    monkeypatch.setattr(storage_cls, "list_files", list_spy)

    out = table.read_incremental(prev, t, include_deletes=True)
    assert sorted(out["id"].to_pylist()) == sorted(ids)
    assert out["_hoodie_commit_time"].unique().to_pylist() == [t]
    assert sorted(s.partition_path for s in slices) == touched
    data_files = [p for p in opened if not p.startswith(".hoodie")]
    if table_type == "MERGE_ON_READ":
        # Updates went to log files: the base files, written before the range, stay unread
        # (the log scan reads the logs natively, not through storage).
        assert all(s.base_file_path is None and s.log_file_paths for s in slices)
        assert data_files == []
    else:
        assert sorted(p.split("/")[0] for p in data_files) == touched
    assert not any(recursive for _, recursive in listed)
    assert {rel for rel, _ in listed} - {".hoodie", ".hoodie/archived"} == set(touched)


def test_cleaned_file_version_fails_deletes_clearly(tmp_path):
    table = shoal.Table.create(tmp_path / "t", "clean", record_key="id", partition_by="p")
    t1 = table.upsert(_arrow(_rows(range(6), "c1")))
    t2 = table.delete(pa.table({"id": [0], "p": ["a"]}))
    for f in (Path(table.path) / "a").iterdir():
        if f.name.endswith(f"_{t1}.parquet"):
            os.remove(f)  # what a cleaner keeping one version would do
    assert table.read_incremental(t1, t2).num_rows == 0
    with pytest.raises(InstantNotFoundError, match="cleaned"):
        table.read_incremental(t1, t2, include_deletes=True)


def test_read_with_query_type_incremental_is_read_incremental(built):
    table, model = built
    lo, hi = model.instants[0], model.instants[2]
    via_read = table.read(query_type="incremental", start=lo, end=hi, include_deletes=True)
    direct = table.read_incremental(lo, hi, include_deletes=True)
    order = [(k, "ascending") for k in ("_hoodie_record_key", "_hoodie_commit_time")]
    assert via_read.sort_by(order) == direct.sort_by(order)
    assert via_read.num_rows > 0
    with pytest.raises(InvalidArgumentError):
        table.read(start=lo)  # a snapshot read has no range
    with pytest.raises(InvalidArgumentError):
        table.read(query_type="incremental", as_of=hi)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_ranges_spanning_a_compaction_and_a_clean_match_the_model(tmp_path, table_type):
    """After a compaction (MOR) and a clean that keeps the last 3 commits, every range either
    returns the model's changes or fails with InstantNotFoundError (its slices were cleaned):
    never other rows. Ranges up to the latest commit without deletes always read."""
    table, model = _build(tmp_path / "t", table_type)
    extra: list[str] = []
    if table_type == "MERGE_ON_READ":
        extra += table.compact()
    for version, keys in (("c9", range(30, 36)), ("c10", range(4, 8))):
        records = _rows(keys, version)
        model.upsert(table.upsert(_arrow(records)), records)
    (clean,) = table.clean(options={"hoodie.cleaner.commits.retained": "3"})
    assert clean > model.instants[-1]
    read, refused = 0, 0
    for lo in _bounds(model.instants) + extra:
        for hi in [None, *model.instants, *extra]:
            if lo is not None and hi is not None and hi <= lo:
                continue
            try:
                got = _ours(table, lo, hi)
            except InstantNotFoundError:
                refused += 1
                continue
            assert got == model.changes(lo, hi), f"range ({lo}, {hi}]"
            read += 1
        changed = table.read_incremental(lo, None)
        expected = model.changes(lo, None)[0]
        assert {
            (r["p"], r["id"]): (r["_hoodie_commit_time"], r["v"], r["ts"]) for r in changed.to_pylist()
        } == (expected)
    assert read > 0 and refused > 0
