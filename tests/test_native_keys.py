"""The record-key kernels of the Rust core against plain Python definitions."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from shoal import _native
from shoal.errors import UnsupportedError


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("arrow_type", [pa.string(), pa.large_string(), pa.binary(), pa.string_view()])
def test_keys_distinct_is_set_semantics(seed, arrow_type):
    rng = random.Random(seed)
    n = rng.randint(0, 300)
    # Few possible keys for some seeds (repeats likely), many for others.
    width = rng.choice([1, 2, 8])
    keys = [
        None if rng.random() < 0.1 else "".join(rng.choice("ab") for _ in range(rng.randint(0, width)))
        for _ in range(n)
    ]
    if arrow_type == pa.binary():
        keys = [None if k is None else k.encode() for k in keys]
    array = pa.array(keys, arrow_type)
    lo = rng.randint(0, n)
    hi = rng.randint(lo, n)
    window = keys[lo:hi]
    valid = [k for k in window if k is not None]
    assert _native.keys_distinct(array.slice(lo, hi - lo)) == (len(set(valid)) == len(valid))


def test_keys_distinct_refuses_other_types():
    with pytest.raises(UnsupportedError):
        _native.keys_distinct(pa.array([1, 2, 3]))
