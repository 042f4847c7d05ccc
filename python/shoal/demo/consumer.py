"""The incremental consumer: keeps a downstream aggregate, revenue and live orders per customer,
up to date from only the changes of the source table since its last checkpoint.

It owns two downstream tables: ``order_facts`` (order -> customer, amount: what each order
contributes, so an update or a delete can take back the old contribution) and
``customer_totals``. Each run reads the source's changes in (checkpoint, latest], applies them to
``order_facts``, re-aggregates only the customers they touched, and stores the new checkpoint.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

import shoal
from shoal.demo.engines import Engine

FACT_COLUMNS = ["order_id", "customer_id", "amount"]
TOTALS_SCHEMA = pa.schema([("customer_id", pa.int64()), ("orders", pa.int64()), ("revenue", pa.float64())])


@dataclass
class ConsumerRun:
    start: str | None
    end: str
    changed: int
    deleted: int
    customers: int


class Consumer:
    def __init__(self, root: str, engine: Engine) -> None:
        self.root = Path(root)
        self.engine = engine
        self.facts = str(self.root / "order_facts")
        self.totals = str(self.root / "customer_totals")
        self.checkpoint_file = self.root / "checkpoint.json"
        if not self.checkpoint_file.exists():
            self.root.mkdir(parents=True, exist_ok=True)
            shoal.Table.create(self.facts, name="order_facts", record_key="order_id")
            shoal.Table.create(self.totals, name="customer_totals", record_key="customer_id")
            self._store(None)

    @property
    def checkpoint(self) -> str | None:
        return json.loads(self.checkpoint_file.read_text())["source_instant"]

    def _store(self, instant: str | None) -> None:
        # Written after the downstream commits: a consumer killed in between re-reads the same
        # changes next time, and applying them again gives the same downstream tables.
        self.checkpoint_file.write_text(json.dumps({"source_instant": instant}))

    def run(self, source: str) -> ConsumerRun | None:
        """Consumes the source's changes since the checkpoint; None when there are none."""
        end = shoal.Table(source).latest_instant()
        start = self.checkpoint
        if end is None or end == start:
            return None
        changes = self.engine.read_incremental(source, start, end, FACT_COLUMNS, include_deletes=True)
        deleted = pc.fill_null(changes.column("_hoodie_is_deleted"), False)
        ids = pc.unique(changes.column("order_id")).to_pylist()
        before = self.engine.read(self.facts, columns=FACT_COLUMNS, filters=[("order_id", "in", ids)])
        live = changes.filter(pc.invert(deleted)).select(FACT_COLUMNS)
        gone = changes.filter(deleted).select(["order_id"])
        self.engine.write(self.facts, live, "upsert")
        self.engine.write(self.facts, gone, "delete")
        touched = sorted(set(_ids(before, "customer_id")) | set(_ids(live, "customer_id")))
        facts = self.engine.read(self.facts, columns=FACT_COLUMNS, filters=[("customer_id", "in", touched)])
        totals = aggregate(facts)
        emptied = pa.table(
            {"customer_id": pa.array(sorted(set(touched) - set(_ids(totals, "customer_id"))), pa.int64())}
        )
        self.engine.write(self.totals, totals, "upsert")
        self.engine.write(self.totals, emptied, "delete")
        self._store(end)
        return ConsumerRun(start, end, live.num_rows, gone.num_rows, len(touched))


def _ids(table: pa.Table, column: str) -> list[int]:
    """The distinct values of ``column`` (a table read before its first commit has no columns)."""
    if column not in table.column_names:
        return []
    return pc.unique(table.column(column)).to_pylist()


def aggregate(orders: pa.Table) -> pa.Table:
    """Live orders and revenue per customer."""
    if orders.num_rows == 0:
        return TOTALS_SCHEMA.empty_table()
    grouped = orders.group_by("customer_id").aggregate([("order_id", "count"), ("amount", "sum")])
    return pa.table(
        {
            "customer_id": grouped.column("customer_id").cast(pa.int64()),
            "orders": grouped.column("order_id_count").cast(pa.int64()),
            "revenue": pc.round(grouped.column("amount_sum"), 2),
        },
        schema=TOTALS_SCHEMA,
    )
