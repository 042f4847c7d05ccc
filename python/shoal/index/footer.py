"""Reading Hudi's key metadata (bloom filter, min/max record key) from base file footers."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

import pyarrow.parquet as pq

from shoal import _native
from shoal.errors import CorruptDataError
from shoal.fs.damage import damaged_parquet
from shoal.fs.storage import Storage

BLOOM_FILTER_KEY = "org.apache.hudi.bloomfilter"
LEGACY_BLOOM_FILTER_KEY = "com.uber.hoodie.bloomfilter"
BLOOM_FILTER_TYPE_KEY = "hoodie_bloom_filter_type_code"
MIN_RECORD_KEY = "hoodie_min_record_key"
MAX_RECORD_KEY = "hoodie_max_record_key"

# The least character whose UTF-16 order (above the surrogates) differs from its code point order.
_UTF16_REORDERED = "\ue000"


def order_sensitive(*bounds: str) -> bool:
    """Whether Java's UTF-16 order (Hudi's, for footer key bounds) and byte order may disagree
    about keys compared with ``bounds``: one holds a character from U+E000 on. Without one,
    wherever a key first differs from a bound both orders agree (ASCII keys, UUIDs)."""
    return any(max(b, default="") >= _UTF16_REORDERED for b in bounds)


@dataclass(frozen=True)
class KeyFooter:
    """What a base file's footer says about its record keys."""

    min_key: str | None
    max_key: str | None
    bloom: _native.BloomFilter | None


class _FooterCache:
    """Base files are immutable, so their footers can be cached by path; bounded because a
    default dynamic bloom filter is about 320 KB per row."""

    def __init__(self, capacity: int = 512) -> None:
        self.capacity = capacity
        self._items: OrderedDict[str, KeyFooter] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> KeyFooter | None:
        with self._lock:
            item = self._items.get(key)
            if item is not None:
                self._items.move_to_end(key)
            return item

    def put(self, key: str, value: KeyFooter) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)


_cache = _FooterCache()


def read_key_footer(storage: Storage, path: str) -> KeyFooter:
    """The min/max keys and bloom filter of a base file (cached)."""
    full = storage.full_path(path)
    cached = _cache.get(full)
    if cached is not None:
        return cached
    try:
        with damaged_parquet(path), storage.open_input_file(path) as f:
            meta = pq.read_metadata(f).metadata or {}
    except FileNotFoundError:
        # No damage: a concurrent clean or rollback deletes files (the writer plans again).
        raise
    except OSError as e:
        # A base file the timeline names that cannot be opened at all is damage to the table too.
        raise CorruptDataError(f"cannot read the footer of {path}: {e}") from e
    kv = {k.decode(): v for k, v in meta.items()}
    raw = kv.get(BLOOM_FILTER_KEY) or kv.get(LEGACY_BLOOM_FILTER_KEY)
    bloom = None
    if raw:
        type_code = kv.get(BLOOM_FILTER_TYPE_KEY)
        bloom = _native.BloomFilter.from_footer(raw.decode(), type_code.decode() if type_code else None)
    footer = KeyFooter(
        kv[MIN_RECORD_KEY].decode() if MIN_RECORD_KEY in kv else None,
        kv[MAX_RECORD_KEY].decode() if MAX_RECORD_KEY in kv else None,
        bloom,
    )
    _cache.put(full, footer)
    return footer
