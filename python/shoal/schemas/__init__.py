"""Avro schemas of Hudi's timeline plans and metadata, as Apache Hudi writes them."""

from __future__ import annotations

from importlib import resources


def load_schema(name: str) -> str:
    """The schema JSON text of ``<name>.avsc`` shipped in this package."""
    return resources.files(__package__).joinpath(f"{name}.avsc").read_text()
