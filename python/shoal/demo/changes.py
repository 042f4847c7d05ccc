"""A generated change stream of an RDBMS ``orders`` table, as a CDC tool (Debezium and the like)
would deliver it: inserts, updates and deletes in micro-batches, with duplicates, events out of
order within a batch, and late events that arrive in a later batch than their commit's.

Every event carries the row image after the change and ``updated_at``, the source commit time
in epoch milliseconds: the table's ordering field, so a late event never overwrites a newer one.
Deletes arrive as the last row image with ``_hoodie_is_deleted = true``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

REGIONS = ["emea", "amer", "apac"]
STATUSES = ["created", "paid", "shipped", "delivered"]
SCHEMA = pa.schema(
    [
        ("order_id", pa.int64()),
        ("customer_id", pa.int64()),
        ("region", pa.string()),
        ("status", pa.string()),
        ("amount", pa.float64()),
        ("updated_at", pa.int64()),
        ("_hoodie_is_deleted", pa.bool_()),
    ]
)


@dataclass
class BatchStats:
    inserts: int = 0
    updates: int = 0
    deletes: int = 0
    late: int = 0  # events held back from an earlier batch
    duplicates: int = 0


@dataclass
class ChangeStream:
    """Generates ``batches`` micro-batches over ``customers`` customers, deterministically."""

    seed: int = 7
    customers: int = 500
    first_batch_orders: int = 20_000
    batch_events: int = 4_000
    clock_ms: int = 1_767_225_600_000  # 2026-01-01T00:00:00Z
    _rng: random.Random = field(init=False)
    _live: dict[int, dict] = field(default_factory=dict, init=False)
    _held: list[dict] = field(default_factory=list, init=False)
    _pending_late: set[int] = field(default_factory=set, init=False)
    _next_id: int = field(default=1, init=False)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def _tick(self) -> int:
        self.clock_ms += self._rng.randint(1, 50)
        return self.clock_ms

    def _insert(self) -> dict:
        row: dict[str, Any] = {
            "order_id": self._next_id,
            "customer_id": self._rng.randint(1, self.customers),
            "region": self._rng.choice(REGIONS),
            "status": "created",
            "amount": round(self._rng.uniform(5, 500), 2),
            "updated_at": self._tick(),
            "_hoodie_is_deleted": False,
        }
        self._next_id += 1
        self._live[row["order_id"]] = row
        return dict(row)

    def _update(self, order_id: int) -> dict:
        row = dict(self._live[order_id])
        row["status"] = STATUSES[min(STATUSES.index(row["status"]) + 1, len(STATUSES) - 1)]
        row["amount"] = round(row["amount"] * self._rng.uniform(0.8, 1.2), 2)
        row["updated_at"] = self._tick()
        self._live[order_id] = row
        return dict(row)

    def _delete(self, order_id: int) -> dict:
        row = dict(self._live.pop(order_id))
        row["updated_at"] = self._tick()
        row["_hoodie_is_deleted"] = True
        return row

    def next_batch(self, last: bool = False) -> tuple[pa.Table, BatchStats]:
        """The next micro-batch of change events, and what it holds; the ``last`` one holds no
        event back, so afterwards the table can catch up with the source exactly."""
        stats = BatchStats()
        events: list[dict] = []
        # Events held back from the previous batch arrive now, after newer ones of their orders.
        late, self._held, self._pending_late = self._held, [], set()
        if not self._live:
            events = [self._insert() for _ in range(self.first_batch_orders)]
            stats.inserts = len(events)
        else:
            for _ in range(self.batch_events):
                roll = self._rng.random()
                if roll < 0.35:
                    events.append(self._insert())
                    stats.inserts += 1
                    continue
                order_id = self._rng.choice(list(self._live))
                if roll < 0.9 or order_id in self._pending_late:
                    event = self._update(order_id)
                    stats.updates += 1
                    if not last and self._rng.random() < 0.08:
                        # Delivered late, in the next batch. The order is not deleted meanwhile:
                        # a late event older than a delete would bring the order back.
                        self._held.append(event)
                        self._pending_late.add(order_id)
                        continue
                    events.append(event)
                else:
                    events.append(self._delete(order_id))
                    stats.deletes += 1
            for event in self._rng.sample(events, len(events) // 50):
                events.append(dict(event))  # at-least-once delivery: duplicates
                stats.duplicates += 1
        stats.late = len(late)
        events += late
        self._rng.shuffle(events)  # out of order within the batch
        return pa.Table.from_pylist(events, schema=SCHEMA), stats

    def source_rows(self) -> pa.Table:
        """The source table as the RDBMS holds it now (after every event generated so far)."""
        return pa.Table.from_pylist(list(self._live.values()), schema=SCHEMA)
