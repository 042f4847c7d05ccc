"""What Arrow raises for a parquet file whose bytes are damaged (a cut-off file, a bad footer,
corrupt pages), raised as CorruptDataError naming the file.

Arrow reports such bytes as ``ArrowInvalid`` or as a plain ``OSError`` (its ``IOError``), the
type it also uses for failing storage; only the messages of its parquet decoder tell the two
apart, so an ``OSError`` counts as damage when its message is one of those. Anything else
(a missing file, a permission or network error) stays what it is."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pyarrow as pa

from shoal.errors import CorruptDataError

# Fragments of the messages Arrow's parquet reader and codecs give for bytes they cannot decode.
_DECODE_MESSAGES = (
    "corrupt",
    "magic bytes",
    "thrift",
    "end of stream",
    "parquet",
    "decompress",
    "invalid",
)


@contextmanager
def damaged_parquet(path: str) -> Iterator[None]:
    """Raises CorruptDataError for damaged parquet bytes read inside the block (see module)."""
    try:
        yield
    except CorruptDataError:
        raise
    except pa.ArrowInvalid as e:
        raise CorruptDataError(f"{path} is not a readable parquet file: {e}") from e
    except OSError as e:
        # A missing file is no damage: a concurrent clean or rollback deletes files.
        missing = isinstance(e, FileNotFoundError)
        if missing or e.errno is not None or not any(m in str(e).lower() for m in _DECODE_MESSAGES):
            raise
        raise CorruptDataError(f"{path} is not a readable parquet file: {e}") from e
