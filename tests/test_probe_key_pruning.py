"""Randomized differential probe of record-key pruning: random tables (copy-on-write and
merge-on-read, every key generator shoal writes, bloom, simple and bucket indexes, both bloom
filter types, several file groups, non-ASCII keys ordered differently in UTF-16 and UTF-8) built
by random sequences of writes and services, read with random filters that pin the record key.
Every pruned read (snapshot, read-optimized, time travel) must return exactly what the unpruned
read filtered afterwards returns; a wrong prune would silently drop rows."""

from __future__ import annotations

import contextlib
import random
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import shoal
from shoal.errors import InvalidArgumentError, ShoalError
from shoal.read.filters import apply_filters

RECORD_KEY = "_hoodie_record_key"
DAY_MS = 86_400_000
SEPT_13 = 1_599_955_200_000
TIMESTAMP_OPTIONS = {
    "hoodie.keygen.timebased.timestamp.type": "EPOCHMILLISECONDS",
    "hoodie.keygen.timebased.output.dateformat": "yyyyMMdd",
}
# Characters whose UTF-16 order differs from their code point order (U+E000..U+FFFF sort after
# the surrogates of U+10000 and up in UTF-16, before them in UTF-8), and other non-ASCII ones.
ALPHABET = [
    "a",
    "b",
    "k",
    "z",
    "0",
    "9",
    ",",
    ":",
    "é",
    "中",
    "\ue000",
    "\uffef",
    "\uffff",
    "\U0001f600",
    "\U00010000",
]
PARTS = ["p0", "p1", "p2"]

# (record key fields, partition_by, key_generator, extra options)
KEY_SETUPS: dict[str, tuple[list[str], Any, str | None, dict[str, str]]] = {
    "simple-str": (["id"], "part", None, {}),
    "simple-i64": (["k64"], "part", None, {}),
    "simple-i32": (["k32"], "part", None, {}),
    "flat-str": (["id"], None, None, {}),
    "complex": (["id", "k32"], "part", "COMPLEX", {}),
    "nonpartitioned-complex": (["k64", "id"], None, "NON_PARTITION", {}),
    "custom": (["id"], ["part:SIMPLE", "day:TIMESTAMP"], "CUSTOM", TIMESTAMP_OPTIONS),
    "timestamp": (["k64"], "day", "TIMESTAMP", TIMESTAMP_OPTIONS),
}

DATA_ACTIONS = ("commit", "deltacommit", "replacecommit")
SEEDS = range(32)
CHUNKS = 4


@dataclass
class Probe:
    """One random table, what was ever written to it, and how many reads the footers pruned."""

    rng: random.Random
    key_fields: list[str]
    table: shoal.Table
    table_type: str
    index: str
    alphabet: list[str]
    ts: int = 0
    # Key field values (as tuples) ever written, and the record keys ever stored.
    written: set[tuple] = field(default_factory=set)
    stored_keys: set[str] = field(default_factory=set)

    def fresh_key(self) -> tuple:
        return tuple(_value(self.rng, f, self.alphabet) for f in self.key_fields)

    def rows(self, keys: list[tuple]) -> pa.Table:
        self.ts += 1
        n = len(keys)
        cols: dict[str, list[Any]] = {f: [k[i] for k in keys] for i, f in enumerate(self.key_fields)}
        for f in ("id", "k64", "k32"):
            if f not in cols:
                cols[f] = [_value(self.rng, f, self.alphabet) for _ in range(n)]
        cols["part"] = [self.rng.choice(PARTS) for _ in range(n)]
        cols["day"] = [SEPT_13 + self.rng.randrange(2) * DAY_MS for _ in range(n)]
        cols["v"] = [self.rng.randrange(100) for _ in range(n)]
        cols["ts"] = [self.ts] * n
        self.written.update(keys)
        return pa.table(
            {
                "id": pa.array(cols["id"], pa.string()),
                "k64": pa.array(cols["k64"], pa.int64()),
                "k32": pa.array(cols["k32"], pa.int32()),
                "part": pa.array(cols["part"], pa.string()),
                "day": pa.array(cols["day"], pa.int64()),
                "v": pa.array(cols["v"], pa.int64()),
                "ts": pa.array(cols["ts"], pa.int64()),
            }
        )

    def present(self) -> pa.Table:
        """The table now, in a stable order (file ids are random): a seed replays the same run."""
        now = self.table.read()
        return now.sort_by([(c, "ascending") for c in (RECORD_KEY, "_hoodie_partition_path", "ts", "v")])


def _value(rng: random.Random, name: str, alphabet: list[str] = ALPHABET) -> Any:
    if name == "id":
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 4)))
    if name == "k64":
        return rng.choice([rng.randint(-50, 50), rng.randint(-(2**40), 2**40)])
    return rng.randint(-300, 300)


def _build(tmp_path, seed: int) -> Probe:
    rng = random.Random(seed)
    name = list(KEY_SETUPS)[seed % len(KEY_SETUPS)]
    key_fields, partition_by, key_generator, extra = KEY_SETUPS[name]
    table_type = rng.choice(["COPY_ON_WRITE", "MERGE_ON_READ"])
    index = rng.choice(["BLOOM", "BLOOM", "SIMPLE", "BUCKET"])
    options = {
        **extra,
        "hoodie.index.type": index,
        "hoodie.bloom.index.filter.type": rng.choice(["SIMPLE", "DYNAMIC_V0"]),
        "hoodie.parquet.max.file.size": str(rng.choice([4_000, 8_000, 120_000_000])),
        "hoodie.parquet.small.file.limit": str(rng.choice([0, 0, 100_000])),
        "hoodie.cleaner.commits.retained": str(rng.choice([1, 2, 10])),
        "hoodie.clean.automatic": rng.choice(["true", "false"]),
    }
    if index == "BUCKET":
        options["hoodie.bucket.index.num.buckets"] = str(rng.choice([1, 3]))
    t = shoal.Table.create(
        str(tmp_path / f"t{seed}"),
        name="t",
        table_type=table_type,
        record_key=key_fields if len(key_fields) > 1 else key_fields[0],
        partition_by=partition_by,
        ordering_field="ts",
        key_generator=key_generator,
        options=options,
    )
    # The bucket index refuses keys with ',' or ':' (Hudi's parse of them fails).
    alphabet = [c for c in ALPHABET if index != "BUCKET" or c not in ",:"]
    probe = Probe(rng, key_fields, t, table_type, index, alphabet)
    _write(probe, "bulk_insert")
    # The bucket index keeps its file ids: shoal refuses the replacing operations there.
    operations = [op for op in OPERATIONS if index != "BUCKET" or op not in REPLACING]
    for _ in range(rng.randint(3, 7)):
        _write(probe, rng.choice(operations))
    return probe


def _existing(probe: Probe, n: int) -> pa.Table:
    now = probe.present()
    if now.num_rows == 0:
        return now
    idx = probe.rng.sample(range(now.num_rows), min(n, now.num_rows))
    return now.take(pa.array(idx, pa.int64())).select(["id", "k64", "k32", "part", "day", "v", "ts"])


def _write(probe: Probe, op: str) -> None:
    t, rng = probe.table, probe.rng
    n = rng.randint(20, 120)
    if op in ("bulk_insert", "insert"):
        getattr(t, op)(probe.rows([probe.fresh_key() for _ in range(n)]))
    elif op == "upsert":
        old = _existing(probe, n // 2)
        keys = [tuple(r[f] for f in probe.key_fields) for r in old.to_pylist()]
        keys += [probe.fresh_key() for _ in range(n - len(keys))]
        fresh = probe.rows(list(dict.fromkeys(keys)))
        # An update keeps the record's partition (a partitioned index keys by both).
        by_key = {tuple(r[f] for f in probe.key_fields): r for r in old.to_pylist()}
        rows = fresh.to_pylist()
        for r in rows:
            stored = by_key.get(tuple(r[f] for f in probe.key_fields))
            if stored is not None:
                r["part"], r["day"] = stored["part"], stored["day"]
        t.upsert(pa.Table.from_pylist(rows, fresh.schema))
    elif op == "delete":
        old = _existing(probe, rng.randint(1, 30))
        if old.num_rows:
            t.delete(old)
    elif op == "insert_overwrite":
        rows = probe.rows([probe.fresh_key() for _ in range(n)])
        part = rng.choice(PARTS)
        t.insert_overwrite(rows.filter(pc.equal(rows.column("part"), part)))
    elif op == "delete_partitions":
        parts = sorted(set(probe.present().column("_hoodie_partition_path").to_pylist()))
        if len(parts) > 1:
            t.delete_partitions([rng.choice(parts)])
    elif op == "compact":
        if probe.table_type == "MERGE_ON_READ":
            t.compact()
    elif op == "schedule_compaction":
        # Left pending: later writes go to the new slices, reads merge both.
        if probe.table_type == "MERGE_ON_READ" and not t.pending_compactions():
            t.schedule_compaction()
    elif op == "clean":
        t.clean()
    elif op == "rollback":
        # Not the first commit: a table without one has no schema to read by.
        if sum(e.action in DATA_ACTIONS for e in t.timeline) > 1:
            # Refused (by design) when a clean removed the slices the commit replaced.
            with contextlib.suppress(InvalidArgumentError):
                t.rollback()
    elif op == "savepoint_restore":
        instant = t.savepoint()
        _write(probe, rng.choice(["upsert", "insert", "delete"]))
        t.restore(instant)
        t.delete_savepoint(instant)
    now = probe.present()
    probe.stored_keys.update(now.column(RECORD_KEY).to_pylist())


OPERATIONS = [
    "bulk_insert",
    "insert",
    "upsert",
    "upsert",
    "delete",
    "insert_overwrite",
    "delete_partitions",
    "compact",
    "schedule_compaction",
    "clean",
    "rollback",
    "savepoint_restore",
]

REPLACING = ("insert_overwrite", "delete_partitions")


def _filters(probe: Probe, now: pa.Table) -> list[list[tuple]]:
    """Random filters that pin the record key: present, deleted, older, absent keys, mixed with
    other filters, duplicates and empty lists."""
    rng = probe.rng
    present_vals = [tuple(r[f] for f in probe.key_fields) for r in now.select(probe.key_fields).to_pylist()]
    present_keys = now.column(RECORD_KEY).to_pylist()
    gone_vals = sorted(probe.written - set(present_vals), key=repr)
    gone_keys = sorted(probe.stored_keys - set(present_keys))

    def pick(pool: list, n: int) -> list:
        return [rng.choice(pool) for _ in range(n)] if pool else []

    out: list[list[tuple]] = []
    for _ in range(6):
        keys = pick(present_keys, rng.randint(0, 3)) + pick(gone_keys, rng.randint(0, 2))
        if rng.random() < 0.3:
            keys.append("".join(rng.choice(ALPHABET) for _ in range(3)))
        if keys and rng.random() < 0.2:
            keys.append(keys[0])  # duplicated
        f: list[tuple] = (
            [(RECORD_KEY, "=", keys[0])]
            if len(keys) == 1 and rng.random() < 0.5
            else [(RECORD_KEY, "in", keys)]
        )
        out.append(f + _extra(rng))
        vals = pick(present_vals, rng.randint(0, 3)) + pick(gone_vals, rng.randint(0, 2))
        if rng.random() < 0.3:
            vals.append(probe.fresh_key())
        if vals and rng.random() < 0.2:
            vals.append(vals[-1])
        f = []
        for i, name in enumerate(probe.key_fields):
            column = [v[i] for v in vals]
            if len(column) == 1 and rng.random() < 0.5:
                f.append((name, rng.choice(["=", "=="]), column[0]))
            else:
                f.append((name, "in", column))
        if vals and rng.random() < 0.3:
            # A second filter on a key field narrows what the first pins.
            i = rng.randrange(len(probe.key_fields))
            name = probe.key_fields[i]
            value = vals[0][i] if rng.random() < 0.5 else _value(rng, name)
            op = rng.choice(["!=", "in", "="])
            f.append((name, op, [value] if op == "in" else value))
        rng.shuffle(f)
        out.append(f + _extra(rng))
    out.append([(RECORD_KEY, "in", [])])
    out.append(
        [(probe.key_fields[0], "in", [])] + [(k, "in", [_value(rng, k)]) for k in probe.key_fields[1:]]
    )
    return out


def _extra(rng: random.Random) -> list[tuple]:
    return rng.choice(
        [
            [],
            [],
            [("part", "=", rng.choice(PARTS))],
            [("v", ">=", rng.randrange(100))],
            [("part", "in", rng.sample(PARTS, 2)), ("v", "<", rng.randrange(100))],
        ]
    )


def _rows(t: pa.Table) -> list[str]:
    return sorted(repr(r) for r in t.to_pylist())


def _check(t: shoal.Table, filters: list[tuple], whole: pa.Table | type[ShoalError], **read: Any) -> None:
    """The pruned read against ``whole`` (the unpruned read of the same kind) filtered
    afterwards; or the same refusal, when the unpruned read was refused (a time travel to an
    instant the cleaner moved past)."""
    if not isinstance(whole, pa.Table):
        with pytest.raises(whole):
            t.read(filters=filters, **read)
        return
    expected = apply_filters(whole, filters)
    pruned = t.read(filters=filters, **read)
    assert pruned.schema == expected.schema, (filters, read)
    assert _rows(pruned) == _rows(expected), (t.path, filters, read)


def _whole(t: shoal.Table, **read: Any) -> pa.Table | type[ShoalError]:
    try:
        return t.read(**read)
    except ShoalError as e:
        return type(e)


def _planned(t: shoal.Table, filters: list[tuple] | None, query_type: str) -> int:
    return len(t._plan_read(None, filters, None, query_type)[0])


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_pruned_reads_return_the_unpruned_rows(tmp_path, chunk):
    pruned_somewhere = 0
    for seed in SEEDS[chunk::CHUNKS]:
        probe = _build(tmp_path, seed)
        t = probe.table
        now = probe.present()
        earlier = [e.time for e in t.timeline[:-1] if e.action in DATA_ACTIONS]
        reads: list[dict[str, Any]] = [{}, {"query_type": "read_optimized"}]
        reads += [{"as_of": a} for a in probe.rng.sample(earlier, min(2, len(earlier)))]
        wholes = [_whole(t, **read) for read in reads]
        everything = {qt: _planned(t, None, qt) for qt in ("snapshot", "read_optimized")}
        for filters in _filters(probe, now):
            for read, whole in zip(reads, wholes, strict=True):
                _check(t, filters, whole, **read)
            for qt, n in everything.items():
                pruned_somewhere += _planned(t, filters, qt) < n
    # The probe is not vacuous: footers ruled out base files in many reads.
    assert pruned_somewhere >= 10


def test_a_spark_read_prunes_alike(tmp_path, spark):
    import shoal.spark

    probe = _build(tmp_path, 1)
    t = probe.table
    now = probe.present()
    # Keys of the first file planned that holds rows (the first slice the footers are asked about
    # that can match; a copy-on-write delete of all a file's rows leaves an empty base file), and
    # keys of other files.
    names = [s.base_file_path.rsplit("/", 1)[-1] for s in t._plan_read(None, None, None, "snapshot")[0]]
    held = set(now.column("_hoodie_file_name").to_pylist())
    first = next(name for name in names if name in held)
    in_first = now.filter(pc.equal(now.column("_hoodie_file_name"), first)).column(RECORD_KEY).to_pylist()
    # Two keys of other files: with a random file first, keys of the whole table could repeat
    # the first file's and leave fewer than three rows to find.
    others = [k for k in now.column(RECORD_KEY).to_pylist() if k not in set(in_first)]
    assert in_first and len(others) >= 2
    filters = [(RECORD_KEY, "in", [*in_first[:2], others[len(others) // 2], others[-1], "absent"])]
    assert _planned(t, filters, "snapshot") < _planned(t, None, "snapshot")
    ours = shoal.spark.read(spark, t.path, filters=filters).toArrow()
    expected = apply_filters(t.read(), filters)
    assert expected.num_rows >= 3
    columns = [RECORD_KEY, "id", "k64", "k32", "part", "v", "ts"]
    assert _rows(ours.select(columns)) == _rows(expected.select(columns))


@pytest.mark.parametrize("written", ["VALUE_ONLY", "FIELD_PREFIXED"])
def test_a_one_field_complex_key_is_found_in_either_encoding(tmp_path, written):
    # Hudi 0.14.1 and 0.15.0 keyed a one-field complex key by the bare value (HUDI-7001) and
    # recorded no encoding in hoodie.properties: the table's generator then builds "id:value".
    from shoal.config.table_config import TableConfig
    from shoal.fs.storage import Storage

    path = str(tmp_path / "t")
    shoal.Table.create(path, name="t", record_key="id", partition_by="part", key_generator="COMPLEX")
    storage = Storage(path)
    config = TableConfig.load(storage)
    config.props["hoodie.table.complex.keygen.encoding"] = written
    config.save(storage)
    t = shoal.Table(path)
    for ids in (["a", "b", "c"], ["x", "y", "z"]):
        t.bulk_insert(pa.table({"id": ids, "part": ["p"] * 3, "n": [1, 2, 3]}))
    assert ("id:b" in t.read().column(RECORD_KEY).to_pylist()) == (written == "FIELD_PREFIXED")
    del config.props["hoodie.table.complex.keygen.encoding"]
    config.save(storage)
    t = shoal.Table(path)
    for filters in ([("id", "=", "b")], [("id", "in", ["y", "q", "a"]), ("n", ">=", 1)]):
        expected = apply_filters(t.read(), filters)
        assert expected.num_rows >= 1
        assert _rows(t.read(filters=filters)) == _rows(expected)
    # Still pruned: one of the two files holds the key.
    assert _planned(t, [("id", "=", "b")], "snapshot") == 1
