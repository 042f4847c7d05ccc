"""The ``shoal`` command: inspect and operate tables from a shell."""

from shoal.cli.main import main

__all__ = ["main"]
