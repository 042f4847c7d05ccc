"""shoal: a lakehouse table engine with Apache Hudi's on-disk format."""

from shoal import _native

__version__ = _native.__version__
