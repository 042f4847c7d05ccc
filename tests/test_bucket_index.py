"""The bucket index (hoodie.index.type=BUCKET, simple engine).

Expected buckets come from Java's hashing written out here by its definition
(``String.hashCode`` over UTF-16 code units, ``List.hashCode``, ``(h & Integer.MAX_VALUE) % n``)
and Hudi's reading of hash values from a record key, not from shoal's vectorised code."""

from __future__ import annotations

import os
import random
import re

import pyarrow as pa
import pytest

import shoal
from shoal.errors import InvalidOptionError, InvalidRecordKeyError, UnsupportedError
from shoal.index import bucket as bucket_module
from shoal.index.bucket import bucket_file_id, bucket_ids, bucket_of_file, java_string_hashes
from shoal.timeline.timeline import Timeline
from shoal.write.assigner import Assignment
from shoal.write.stream_writer import FLUSH_BUCKET_FULL
from shoal.write.writer import Operation, make_index
from tests.hudi_oracle import hudi_rs_read, rows_by

MASK = 0xFFFFFFFF


def java_string_hash(s: str) -> int:
    """``String.hashCode`` (as an unsigned 32-bit value): h = 31 * h + c over UTF-16 units."""
    units = s.encode("utf-16-le")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i : i + 2], "little")) & MASK
    return h


def java_list_hash(values: list[str | None]) -> int:
    """``List.hashCode``: h = 31 * h + (e == null ? 0 : e.hashCode()), starting at 1."""
    h = 1
    for v in values:
        h = (31 * h + (0 if v is None else java_string_hash(v))) & MASK
    return h


def hudi_hash_values(key: str, fields: list[str]) -> list[str | None]:
    """Hudi's BucketIdentifier.getHashKeys for well-formed keys: a key without ':' is its own
    value; otherwise ``f:v`` parts split on ',' (a value ends at its next ':')."""
    if ":" not in key:
        return [key]
    pairs = {}
    for part in key.split(","):
        if part:
            name, value = part.split(":")[:2]
            pairs[name] = value
    return [pairs.get(f) for f in fields]


def expected_bucket(key: str, fields: list[str], n: int) -> int:
    return (java_list_hash(hudi_hash_values(key, fields)) & 0x7FFFFFFF) % n


# ---- hashing ------------------------------------------------------------------------------------


def test_java_string_hash_known_values():
    # Values every JVM returns ("abc".hashCode() == 96354 is the Javadoc's arithmetic).
    strings = ["", "a", "abc", "hello"]
    assert java_string_hashes(pa.array(strings)).tolist() == [0, 97, 96354, 99162322]
    assert [java_string_hash(s) for s in strings] == [0, 97, 96354, 99162322]


def test_java_string_hash_counts_utf16_units():
    # U+1F600 is the surrogate pair D83D DE00: 0xD83D * 31 + 0xDE00.
    assert java_string_hashes(pa.array(["\U0001f600"])).tolist() == [0xD83D * 31 + 0xDE00]
    assert java_string_hash("\U0001f600") == 0xD83D * 31 + 0xDE00


@pytest.mark.parametrize("slice_bytes", [1 << 22, 7], ids=["one-slice", "many-slices"])
def test_java_string_hashes_match_the_definition(monkeypatch, slice_bytes):
    monkeypatch.setattr(bucket_module, "_HASH_SLICE_BYTES", slice_bytes)
    rng = random.Random(3)
    alphabet = ["a", "Z", "0", "é", "ß", "日", "本", "\U0001f600", "\U00010348", "\u07ff", "\uffff", " "]
    strings = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(500)]
    expected = [java_string_hash(s) for s in strings]
    got = java_string_hashes(pa.array(strings)).view("uint32").tolist()
    assert got == expected
    # Sliced and large_string arrays.
    assert java_string_hashes(pa.array(strings).slice(17, 100)).view("uint32").tolist() == expected[17:117]
    large = pa.array(strings, pa.large_string())
    assert java_string_hashes(large).view("uint32").tolist() == expected


def test_bucket_ids_of_simple_keys():
    keys = [str(i) for i in range(300)] + ["uuid-7f3a", "ñandú", "日本語", "\U0001f600-key", ""]
    for n in (1, 4, 256, 1000):
        want = [((31 + java_string_hash(k)) & 0x7FFFFFFF) % n for k in keys]
        assert bucket_ids(pa.array(keys), ["id"], n).tolist() == want


@pytest.mark.parametrize("slice_bytes", [1 << 22, 11], ids=["one-slice", "many-slices"])
def test_bucket_ids_of_complex_keys(monkeypatch, slice_bytes):
    monkeypatch.setattr(bucket_module, "_HASH_SLICE_BYTES", slice_bytes)
    keys = [
        "id:1,name:ab",
        "id:2,name:ñandú",
        "id:3,name:日本",
        "id:4,name:\U0001f600",
        "id:5,name:x:y",  # Hudi's split takes "x" as the value
        "id:6,name:z,",  # a trailing ',' leaves no empty part in Java's split
        "id:__null__,name:__empty__",
    ]
    for fields in (["id", "name"], ["name"], ["name", "id"], ["id"]):
        want = [expected_bucket(k, fields, 16) for k in keys]
        assert bucket_ids(pa.array(keys), fields, 16).tolist() == want, fields
    # Spot values worked out by hand: [1, "ab"] -> 31 * (31 + '1') + "ab".hashCode().
    assert bucket_ids(pa.array(["id:1,name:ab"]), ["id", "name"], 1 << 30).tolist() == [
        31 * (31 + 49) + (97 * 31 + 98)
    ]


def test_bucket_ids_match_the_jvm(spark):
    """The JVM behind the Spark session computes the expected buckets: Java's own
    String.split, ArrayList.hashCode and String.hashCode, with Hudi's getHashKeys steps."""
    jvm = spark.sparkContext._jvm
    comma = jvm.java.util.regex.Pattern.compile(",")
    colon = jvm.java.util.regex.Pattern.compile(":")

    def jvm_bucket(key: str, fields: list[str], n: int) -> int:
        if ":" not in key:
            values = [key]
        else:
            pairs = {}
            for part in comma.split(key):
                name_value = list(colon.split(part))
                pairs[name_value[0]] = name_value[1]
            values = [pairs.get(f) for f in fields]
        hashed = jvm.java.util.ArrayList()
        for v in values:
            hashed.add(v)
        return (hashed.hashCode() & 0x7FFFFFFF) % n

    rng = random.Random(5)
    alphabet = ["a", "q", "7", "-", " ", "é", "日", "\U0001f600", "\U00010348", "\uffff"]

    def text() -> str:
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12)))

    simple = [text() for _ in range(60)] + ["a:b", "urn:x:1"]
    complex_ = [f"id:{text()},name:{text()}" for _ in range(60)] + ["id:1,name:x:y", "id:2,name:z,"]
    # Shapes no key generator writes but Hudi parses: an empty name, extra ':' in a value,
    # trailing commas, other fields, many parts, a field name differing in case.
    complex_ += [
        ":v,id:1",
        "id:a:b:c,name:q:",
        "id:1,,,",
        "other:1,id:2",
        ",".join(f"f{i}:{i}" for i in range(30)) + ",name:many",
        "ID:1,id:2,Name:3",
        "id:\U0001f600:x,name:日",
    ]
    for n in (7, 256):
        assert bucket_ids(pa.array(simple), ["id"], n).tolist() == [jvm_bucket(k, ["id"], n) for k in simple]
        for fields in (["id", "name"], ["name"]):
            want = [jvm_bucket(k, fields, n) for k in complex_]
            assert bucket_ids(pa.array(complex_), fields, n).tolist() == want


def test_simple_key_with_a_colon_hashes_like_hudi():
    # Hudi reads "a:b" as a complex key without the hash field: the list [null], hash 31.
    assert bucket_ids(pa.array(["a:b", "urn:x:1"]), ["id"], 1000).tolist() == [31, 31]


@pytest.mark.parametrize("key", ["id:1,name:", "id:1,,name:2", "id:1,id:2", "id:1,junk"])
def test_keys_hudi_cannot_parse_are_refused(key):
    with pytest.raises(InvalidRecordKeyError):
        bucket_ids(pa.array(["id:9,name:ok", key]), ["id", "name"], 8)


def test_bucket_file_ids():
    for b in (0, 7, 255, 12345678):
        fid = bucket_file_id(b)
        assert re.fullmatch(r"\d{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-0", fid), fid
        assert fid.startswith(f"{b:08d}-")
        assert bucket_of_file(fid) == b
    assert bucket_file_id(3) != bucket_file_id(3)
    assert bucket_of_file("3f2a9c1e-0b7d-4c1e-9a55-1d2b3c4d5e6f-0") is None


# ---- writes ---------------------------------------------------------------------------------------

NAMES = ["ab", "ñandú", "日本", "\U0001f600", "x:y", "zz"]
COLUMNS = ["id", "name", "city", "ts", "v"]
SCHEMA = pa.schema(
    [("id", pa.int64()), ("name", pa.string()), ("city", pa.string()), ("ts", pa.int64()), ("v", pa.int64())]
)


class Model:
    """Rows by (partition, record key), event-time ordering on ``ts`` (later rows win ties)."""

    def __init__(self, key_fields: list[str], partitioned: bool) -> None:
        self.key_fields = key_fields
        self.partitioned = partitioned
        self.rows: dict[tuple, dict] = {}

    def identity(self, row: dict) -> tuple:
        return (row["city"] if self.partitioned else "", *(row[f] for f in self.key_fields))

    def upsert(self, rows: list[dict]) -> None:
        for row in rows:
            cur = self.rows.get(self.identity(row))
            if cur is None or row["ts"] >= cur["ts"]:
                self.rows[self.identity(row)] = row

    def delete(self, rows: list[dict]) -> None:
        for row in rows:
            self.rows.pop(self.identity(row), None)

    def expected(self) -> list[dict]:
        return sorted(self.rows.values(), key=lambda r: (r["city"], r["id"], r["name"]))


def record_key(row: dict, key_fields: list[str]) -> str:
    if len(key_fields) == 1:
        return str(row[key_fields[0]])
    return ",".join(f"{f}:{row[f]}" for f in key_fields)


def check_layout(table: shoal.Table, key_fields: list[str], hash_fields: list[str], n: int) -> None:
    """Every record lives in the file group of its bucket; a partition has at most one file
    group per bucket, and so at most n file groups."""
    per_partition: dict[str, list[int]] = {}
    for sl in table.file_slices():
        bucket = bucket_of_file(sl.file_id)
        assert bucket is not None and bucket < n, sl.file_id
        per_partition.setdefault(sl.partition_path, []).append(bucket)
    for buckets in per_partition.values():
        assert len(buckets) == len(set(buckets)) <= n
    rows = table.read(columns=["_hoodie_record_key", "_hoodie_file_name", "_hoodie_partition_path"])
    for key, file_name, partition in zip(
        *(
            rows.column(c).to_pylist()
            for c in ("_hoodie_record_key", "_hoodie_file_name", "_hoodie_partition_path")
        ),
        strict=True,
    ):
        file_id = file_name.split("_")[0]
        assert bucket_of_file(file_id) == expected_bucket(key, hash_fields, n), (key, file_id)
        assert bucket_of_file(file_id) in per_partition[partition]


CASES = [
    ("COPY_ON_WRITE", True, ["id"], None),
    ("COPY_ON_WRITE", False, ["id", "name"], "name"),
    ("MERGE_ON_READ", True, ["id", "name"], None),
    ("MERGE_ON_READ", False, ["id"], None),
    ("MERGE_ON_READ", True, ["id"], None),
]
# The last case compacts inline every 3 delta commits: compaction keeps the buckets' file ids.
INLINE_COMPACTION = {"hoodie.compact.inline": "true", "hoodie.compact.inline.max.delta.commits": "3"}


@pytest.mark.parametrize(
    ("table_type", "partitioned", "key_fields", "hash_field"),
    CASES,
    ids=[
        "cow-part-simple",
        "cow-flat-complex-hash-name",
        "mor-part-complex",
        "mor-flat-simple",
        "mor-part-simple-compacted",
    ],
)
def test_records_land_in_their_buckets(request, tmp_path, table_type, partitioned, key_fields, hash_field):
    n = 5
    options = {"hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": str(n)}
    compacted = request.node.callspec.id.endswith("compacted")
    if compacted:
        options.update(INLINE_COMPACTION)
    if hash_field:
        options["hoodie.bucket.index.hash.field"] = hash_field
    path = str(tmp_path / "t")
    table = shoal.Table.create(
        path,
        "bucketed",
        table_type=table_type,
        record_key=key_fields if len(key_fields) > 1 else key_fields[0],
        partition_by="city" if partitioned else None,
        ordering_field="ts",
        options=options,
    )
    hash_fields = hash_field.split(",") if hash_field else key_fields
    rng = random.Random(11)
    model = Model(key_fields, partitioned)
    next_id = 0

    def fresh(count: int, ts: int) -> list[dict]:
        nonlocal next_id
        rows = []
        for _ in range(count):
            rows.append(
                {
                    "id": next_id,
                    "name": rng.choice(NAMES),
                    "city": rng.choice(["sf", "nyc"]),
                    "ts": ts,
                    "v": rng.randint(0, 1000),
                }
            )
            next_id += 1
        return rows

    steps = ["upsert", "upsert", "delete", "insert", "upsert", "bulk_insert", "delete", "upsert"]
    deleted: list[dict] = []
    for step, op in enumerate(steps, start=1):
        existing = list(model.rows.values())
        if op == "upsert":
            changed = [
                dict(r, ts=step + rng.choice([-5, 1]), v=-step)
                for r in rng.sample(existing, len(existing) // 3)
            ]
            # Keys deleted earlier come back (on MOR, into slices whose logs delete them).
            back = [dict(r, ts=step, v=-100 * step) for r in deleted[: len(deleted) // 2]]
            deleted = deleted[len(deleted) // 2 :]
            rows = changed + back + fresh(rng.randint(10, 40), step)
            table.upsert(pa.Table.from_pylist(rows, schema=SCHEMA))
            model.upsert(rows)
        elif op in ("insert", "bulk_insert"):
            rows = fresh(rng.randint(5, 25), step)
            table.write(pa.Table.from_pylist(rows, schema=SCHEMA), op)
            model.upsert(rows)
        else:
            rows = rng.sample(existing, len(existing) // 4)
            # A key the table does not hold: nothing to delete.
            rows.append({"id": 10_000, "name": "ab", "city": "sf", "ts": 0, "v": 0})
            keys = pa.Table.from_pylist([{c: r[c] for c in ("id", "name", "city")} for r in rows])
            table.delete(keys)
            model.delete(rows)
            deleted += rows[:-1]
        expected = model.expected()
        assert rows_by(table.read(), COLUMNS, ["city", "id", "name"]) == expected, (step, op)
        assert rows_by(hudi_rs_read(path), COLUMNS, ["city", "id", "name"]) == expected, (step, op)
        check_layout(table, key_fields, hash_fields, n)
    # Later writes reused the buckets' file groups: never more than n per partition.
    assert len(table.file_slices()) <= n * (2 if partitioned else 1)
    if compacted:
        assert [i for i in table.instants() if i.action.value in ("commit", "compaction")], table.instants()


def test_new_file_group_only_for_a_bucket_without_one(tmp_path):
    path = str(tmp_path / "t")
    options = {"hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "64"}
    table = shoal.Table.create(path, "t", record_key="id", ordering_field="ts", options=options)
    rows = [{"id": i, "name": "a", "city": "sf", "ts": 1, "v": i} for i in range(3)]
    table.upsert(pa.Table.from_pylist(rows, schema=SCHEMA))
    want = {expected_bucket(str(i), ["id"], 64) for i in range(3)}
    assert {bucket_of_file(sl.file_id) for sl in table.file_slices()} == want
    before = {sl.file_id for sl in table.file_slices()}
    # A new key of an existing bucket goes to that bucket's file group.
    same_bucket = next(
        i for i in range(3, 10_000) if expected_bucket(str(i), ["id"], 64) == expected_bucket("0", ["id"], 64)
    )
    table.upsert(
        pa.Table.from_pylist([{"id": same_bucket, "name": "a", "city": "sf", "ts": 2, "v": 0}], schema=SCHEMA)
    )
    assert {sl.file_id for sl in table.file_slices()} == before


# ---- options and refusals ---------------------------------------------------------------------


def _timeline_files(path: str) -> list[str]:
    return sorted(os.listdir(os.path.join(path, ".hoodie")))


def _small_bucket_table(tmp_path, n: int, table_type: str = "COPY_ON_WRITE") -> tuple[str, shoal.Table]:
    path = str(tmp_path / "t")
    options = {"hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": str(n)}
    table = shoal.Table.create(
        path, "t", table_type=table_type, record_key="id", ordering_field="ts", options=options
    )
    rows = [{"id": i, "name": "a", "city": "sf", "ts": 1, "v": i} for i in range(60)]
    table.upsert(pa.Table.from_pylist(rows, schema=SCHEMA))
    return path, table


def _batch(ids: range) -> pa.Table:
    return pa.Table.from_pylist(
        [{"id": i, "name": "a", "city": "sf", "ts": 2, "v": i} for i in ids], schema=SCHEMA
    )


@pytest.mark.parametrize(
    "options",
    [
        {"hoodie.index.type": "BUCKET", "hoodie.index.bucket.engine": "CONSISTENT_HASHING"},
        {"hoodie.index.type": "BUCKET", "hoodie.index.bucket.engine": "RANGE"},
        {"hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "0"},
        {"hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "many"},
        {"hoodie.index.type": "BUCKET", "hoodie.bucket.index.hash.field": "id,"},
        {"hoodie.index.type": "BUCKET", "hoodie.bucket.index.hash.field": "name"},
        {"hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "2"},
        {"hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "8"},
        {"hoodie.index.type": "BLOOMS"},
    ],
    ids=["consistent", "engine", "zero", "nan", "empty-field", "not-a-key", "fewer", "more", "type"],
)
def test_bad_options_are_refused_and_leave_the_timeline(tmp_path, options):
    path, table = _small_bucket_table(tmp_path, 4)
    before = _timeline_files(path)
    with pytest.raises(InvalidOptionError) as err:
        table.upsert(_batch(range(50, 80)), options=options)
    assert any(word in str(err.value) for word in ("bucket", "index")), err.value
    assert _timeline_files(path) == before
    if "CONSISTENT_HASHING" in options.values():
        with pytest.raises(InvalidOptionError, match="SIMPLE"):
            shoal.Table(path, options=options)


def test_a_table_of_another_index_cannot_switch_to_buckets(tmp_path):
    path = str(tmp_path / "t")
    table = shoal.Table.create(path, "t", record_key="id", ordering_field="ts")
    table.upsert(_batch(range(10)))
    before = _timeline_files(path)
    with pytest.raises(InvalidOptionError, match="bucket"):
        table.upsert(_batch(range(5, 15)), options={"hoodie.index.type": "BUCKET"})
    assert _timeline_files(path) == before


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"], ids=["cow", "mor"])
def test_streaming_writer_routes_to_buckets(tmp_path, table_type):
    """Batches of one checkpoint keep filling the file group their bucket opened (small buffers
    flush each bucket several times within an instant); upserts and deletes, over checkpoints."""
    n = 4
    path = str(tmp_path / "t")
    options = {"hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": str(n)}
    table = shoal.Table.create(
        path,
        "t",
        table_type=table_type,
        record_key="id",
        partition_by="city",
        ordering_field="ts",
        options=options,
    )
    rng = random.Random(7)
    model = Model(["id"], partitioned=True)
    ts = 0
    for _ in range(3):
        for operation in ("upsert", "delete"):
            with table.stream_writer(operation, bucket_buffer_bytes=300, total_buffer_bytes=6000) as writer:
                for _ in range(4):
                    ts += 1
                    ids = rng.sample(range(120), 25)
                    rows = [
                        {"id": i, "name": "n", "city": ["sf", "nyc"][i % 2], "ts": ts, "v": rng.randint(0, 9)}
                        for i in ids
                    ]
                    if operation == "delete":
                        rows = rows[:6]
                        writer.write(pa.Table.from_pylist([{"id": r["id"], "city": r["city"]} for r in rows]))
                        model.delete(rows)
                    else:
                        writer.write(pa.Table.from_pylist(rows, schema=SCHEMA))
                        model.upsert(rows)
                if operation == "upsert":
                    assert writer.stats.flushes[FLUSH_BUCKET_FULL] > 2 * n
            expected = model.expected()
            assert rows_by(table.read(), COLUMNS, ["city", "id", "name"]) == expected
            assert rows_by(hudi_rs_read(path), COLUMNS, ["city", "id", "name"]) == expected
            check_layout(table, ["id"], ["id"], n)


def test_streaming_writer_refuses_bad_bucket_options_before_any_write(tmp_path):
    path, table = _small_bucket_table(tmp_path, 4, "MERGE_ON_READ")
    before = _timeline_files(path)
    with pytest.raises(InvalidOptionError, match="hash"):
        table.stream_writer(options={"hoodie.bucket.index.hash.field": "name"})
    assert _timeline_files(path) == before


def test_other_write_paths_refuse_the_bucket_index(tmp_path):
    # make_index builds the index of the data source writer (df.write.format("shoal")); the
    # local, streaming and shoal.spark.write paths plan the bucket index without it.
    _, table = _small_bucket_table(tmp_path, 4)
    wc = table.write_config.merged({"hoodie.index.type": "BUCKET"})
    for op in Operation:
        with pytest.raises(UnsupportedError, match="BUCKET"):
            make_index(table.storage, wc, op)


def test_bad_bucket_options_fail_before_a_failed_write_is_rolled_back(tmp_path):
    path, table = _small_bucket_table(tmp_path, 4)
    writer = table._writer(None)
    writer.start(Operation.UPSERT, Assignment(), Timeline.load(table.storage, table.config), [])
    before = _timeline_files(path)
    with pytest.raises(InvalidOptionError, match=r"hash\.field"):
        table.upsert(_batch(range(3)), options={"hoodie.bucket.index.hash.field": "name"})
    assert _timeline_files(path) == before
    table.upsert(_batch(range(3)))  # the next good write rolls the failed one back
    assert _timeline_files(path) != before
