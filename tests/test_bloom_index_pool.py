"""The bloom index keeps its lookup threads for the process; a process forked after a lookup
(multiprocessing's fork start method) gets threads of its own instead of waiting forever on
threads that exist only in its parent."""

from __future__ import annotations

import multiprocessing

import pyarrow as pa

import shoal
from shoal.index.bloom import BloomIndex


def _tags(path: str, confirm: bool) -> list:
    table = shoal.Table(path)
    keys = pa.array([f"k{i}" for i in range(0, 40, 3)])
    (tags,) = BloomIndex(table.storage).tag([(keys, table.file_slices())], confirm=confirm)
    return tags.to_pylist()


def _child(path: str, out: multiprocessing.Queue) -> None:
    out.put([_tags(path, True), _tags(path, False)])


def test_lookups_work_in_a_forked_process(tmp_path):
    t = shoal.Table.create(str(tmp_path / "t"), name="t", record_key="id")
    t.insert(pa.table({"id": [f"k{i}" for i in range(0, 40, 2)]}))
    expected = [_tags(t.path, True), _tags(t.path, False)]
    assert sum(tag is not None for tag in expected[0]) == len(range(0, 40, 6))
    context = multiprocessing.get_context("fork")
    out = context.Queue()
    child = context.Process(target=_child, args=(t.path, out))
    child.start()
    try:
        child.join(timeout=60)
        assert child.exitcode == 0, "the forked lookup hung or failed"
        assert out.get(timeout=5) == expected
    finally:
        if child.is_alive():
            child.kill()
            child.join()
