"""held_by: which keys of a bucket a base file's key column holds (the bloom index's
confirmation, the Spark log append's check for bloom false positives)."""

from __future__ import annotations

import random

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from shoal.index.membership import held_by


def _oracle(probe: list, stored: list) -> list[bool]:
    present = {k for k in stored if k is not None}
    return [k is not None and k in present for k in probe]


@pytest.mark.parametrize("key_type", [pa.string(), pa.large_string(), pa.binary()])
def test_held_by_answers_as_a_set_lookup(key_type):
    rng = random.Random(5)
    universe = [f"{rng.getrandbits(64):016x}-{i}" for i in range(3_000)] + ["", "é", "a\x00b"]
    stored = [*rng.sample(universe, 1_500), None]
    probe = [*rng.sample(universe, 400), None, "", "never stored"]
    if key_type == pa.binary():
        stored = [k.encode() if k is not None else None for k in stored]
        probe = [k.encode() if k is not None else None for k in probe]
    chunked = pa.chunked_array([pa.array(stored[:700], key_type), pa.array(stored[700:], key_type)])
    got = held_by(pa.array(probe, key_type), chunked)
    assert got.to_pylist() == _oracle(probe, stored)
    # Probes in chunks, stored in one array: the same answers.
    probe_chunks = pa.chunked_array([pa.array(probe[:100], key_type), pa.array(probe[100:], key_type)])
    assert held_by(probe_chunks, chunked.combine_chunks()).to_pylist() == _oracle(probe, stored)


def test_other_key_types_use_arrow():
    probe, stored = pa.array([1, 5, None, 7]), pa.array([7, 1, 3])
    assert held_by(probe, stored).to_pylist() == pc.is_in(probe, value_set=stored).to_pylist()
