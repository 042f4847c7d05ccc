"""``t.rollback()`` of a completed compaction, the latest data instant: as Hudi's rollback of a
compaction, its base files and its instant go, and its file groups read from the slices before
it, which hold the same records. Refused when a clean removed those slices; a rollback a crash
interrupted is finished by the next one (not taken for the commit before it). Rows are a
model's, read by shoal and by hudi-rs."""

from __future__ import annotations

from pathlib import Path

import pytest

import shoal
from shoal.errors import InvalidArgumentError
from shoal.fs.storage import Storage
from shoal.services import rollback as rollback_mod
from shoal.timeline.instant import Action, Instant, State
from shoal.timeline.timeline import Timeline
from tests.hudi_oracle import hudi_rs_read, rows_by
from tests.table_files import file_digests
from tests.test_rollback_crash import Crash, _batch

COLUMNS = ["id", "p", "v"]
MANUAL = {"hoodie.compact.inline": "false", "hoodie.clean.automatic": "false"}


def _check(path: Path, model: dict[int, int]) -> None:
    expected = [{"id": i, "p": "a" if i % 2 else "b", "v": v} for i, v in sorted(model.items())]
    assert rows_by(shoal.Table(str(path)).read(columns=COLUMNS), COLUMNS, ["id"]) == expected
    assert rows_by(hudi_rs_read(str(path)), COLUMNS, ["id"]) == expected


def _compacted(path: Path) -> tuple[shoal.Table, dict[int, int], str, str]:
    """A merge-on-read table with logs on both partitions, then compacted: (table, model, the
    last delta commit, the compaction)."""
    t = shoal.Table.create(
        str(path),
        name="t",
        table_type="MERGE_ON_READ",
        record_key="id",
        partition_by="p",
        ordering_field="ts",
        options=MANUAL,
    )
    t.upsert(_batch(list(range(8)), 1))
    last = t.upsert(_batch([0, 1, 2, 3], 2))
    model = {i: 2 if i < 4 else 1 for i in range(8)}
    [compaction] = t.compact()
    return t, model, last, compaction


def _instants(path: Path) -> list[tuple[str, str, str]]:
    table = shoal.Table(str(path))
    timeline = Timeline.load(Storage(str(path)), table.config)
    return [(i.requested_time, i.action.value, i.state.name) for i in timeline.instants]


def test_a_completed_compaction_rolls_back_to_the_slices_before_it(tmp_path):
    path = tmp_path / "t"
    t, model, last, compaction = _compacted(path)
    compacted = {p.name for p in path.rglob(f"*_{compaction}.parquet")}
    assert compacted
    rollback = t.rollback()
    assert not any(p.name in compacted for p in path.rglob("*.parquet"))
    instants = _instants(path)
    assert compaction not in {i[0] for i in instants}
    assert (rollback, "rollback", "COMPLETED") in instants
    assert (last, "deltacommit", "COMPLETED") in instants
    _check(path, model)
    # The table goes on: another write, and a compaction of it all.
    t.upsert(_batch([4, 5], 3))
    model |= {4: 3, 5: 3}
    assert len(t.compact()) == 1
    _check(path, model)


def test_a_compaction_whose_earlier_slices_were_cleaned_is_not_rolled_back(tmp_path):
    path = tmp_path / "t"
    t, model, _, _ = _compacted(path)
    versions = {
        "hoodie.cleaner.policy": "KEEP_LATEST_FILE_VERSIONS",
        "hoodie.cleaner.fileversions.retained": "1",
    }
    assert t.clean(options=versions)
    before = file_digests(path)
    with pytest.raises(InvalidArgumentError, match="clean"):
        t.rollback()
    assert file_digests(path) == before
    _check(path, model)


def test_a_crashed_compaction_rollback_is_finished_by_the_next(tmp_path, monkeypatch):
    path = tmp_path / "t"
    t, model, last, compaction = _compacted(path)
    real = rollback_mod._neutralise_appends

    def crash(*args, **kwargs):
        raise Crash

    monkeypatch.setattr(rollback_mod, "_neutralise_appends", crash)
    with pytest.raises(Crash):
        t.rollback()
    monkeypatch.setattr(rollback_mod, "_neutralise_appends", real)
    # Reverted to inflight before any file went: readers see the slices before it.
    assert (compaction, "compaction", "INFLIGHT") in _instants(path)
    _check(path, model)

    shoal.Table(str(path)).rollback()
    instants = _instants(path)
    assert compaction not in {i[0] for i in instants}
    assert all(state == "COMPLETED" for _, _, state in instants)
    # The delta commit before it was not taken for the commit to roll back.
    assert (last, "deltacommit", "COMPLETED") in instants
    _check(path, model)


def test_a_consumer_checkpoint_at_a_rolled_back_compaction_reads_on(tmp_path):
    """Undoing a compaction takes no rows away: no RolledBackInstantError."""
    path = tmp_path / "t"
    t, _, _, compaction = _compacted(path)
    t.rollback()
    t.upsert(_batch([9], 5))
    changed = t.read_incremental(start=compaction)
    assert changed.column("id").to_pylist() == [9]
    assert (
        Instant(compaction, Action.COMPACTION, State.COMPLETED)
        not in Timeline.load(Storage(str(path)), t.config).instants
    )
