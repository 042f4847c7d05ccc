"""A write whose planning lists files after a concurrent write and clean (another process's,
under optimistic concurrency) replaced the files of its keys finds no file holding them: without
a check, it writes them as new keys into new file groups, no file group overlaps the concurrent
write's, the commit's conflict check passes, and the table holds those keys twice. A plan made
while a clean, archival or rollback ran is made again on the newer timeline."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import shoal
from shoal.errors import CommitConflictError
from shoal.write.writer import Writer
from tests.hudi_oracle import hudi_rs_read, rows_by
from tests.test_spark_write_replan import OCC, SERVICES, Model, _create, _rows, _service

COLUMNS = ["id", "city", "ts", "v"]


def _race(monkeypatch: pytest.MonkeyPatch, path: Path, code: str, times: int) -> list[int]:
    """Runs ``code`` in another process in the first ``times`` plans, after the writer loaded
    its timeline and before it lists the files it plans with."""
    original = Writer.compact_before_widening
    plans: list[int] = []

    def compact_before_widening(self, timeline, data_schema):
        plans.append(1)
        if len(plans) <= times:
            _service(path, code, SERVICES)
        return original(self, timeline, data_schema)

    monkeypatch.setattr(Writer, "compact_before_widening", compact_before_widening)
    return plans


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_write_planned_across_a_concurrent_clean_plans_again(tmp_path, monkeypatch, table_type):
    path = tmp_path / "t"
    model = Model()
    table = _create(path, table_type)
    table.upsert(_rows(range(20), 1), options=OCC)
    model.upsert(_rows(range(20), 1))
    # Another writer rewrites every file group (compacting them on merge-on-read), then cleans
    # the versions this writer's timeline knows.
    compact = "t.compact(options=options)\n" if table_type == "MERGE_ON_READ" else ""
    code = "t.upsert(_rows(range(20), 2), options=options)\n" + compact + "t.clean(options=options)\n"
    plans = _race(monkeypatch, path, code, times=1)
    model.upsert(_rows(range(20), 2))
    update = _rows([1, 2, 21], 3)
    shoal.Table(str(path)).upsert(update, options=OCC)
    model.upsert(update)
    for got in (shoal.Table(str(path)).read(), hudi_rs_read(str(path))):
        assert rows_by(got, COLUMNS, ["id"]) == model.expected()
    assert len(plans) == 2


def test_a_write_whose_every_plan_goes_stale_is_a_conflict(tmp_path, monkeypatch):
    path = tmp_path / "t"
    table = _create(path, "COPY_ON_WRITE")
    table.upsert(_rows(range(20), 1), options=OCC)
    code = "t.upsert(_rows(range(20), 2), options=options)\nt.clean(options=options)\n"
    _race(monkeypatch, path, code, times=3)
    with pytest.raises(CommitConflictError, match="kept changing"):
        shoal.Table(str(path)).upsert(pa.table({"id": [1], "city": ["b"], "ts": [9], "v": [9]}), options=OCC)
    # The services' writes are all the table holds: the refused write left nothing.
    model = Model()
    model.upsert(_rows(range(20), 2))
    assert rows_by(shoal.Table(str(path)).read(), COLUMNS, ["id"]) == model.expected()
