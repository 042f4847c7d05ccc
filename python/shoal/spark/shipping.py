"""Shipping shoal to Spark executors that do not have it installed (``spark.archives``).

Every Python worker of a shoal job imports shoal, compiled extension (``shoal/_native.abi3.so``)
included. Python cannot import an extension module from a zip file, so ``--py-files`` /
``spark.submit.pyFiles`` / ``addPyFile`` cannot ship it (a zip or egg imports shoal's modules but
not ``_native``; a wheel is not even put on the path). ``spark.archives`` can: Spark unpacks each
archive into a directory named after its ``#alias`` in the working directory of every executor
and in the driver's SparkFiles directory, and PySpark puts that directory on ``sys.path`` of every
Python worker it starts, the ones on the driver included (the ``shoal`` data source plans and
commits in those). An archive whose root holds the package's files, shipped under the alias
``shoal``, is therefore importable as ``shoal`` everywhere, with no ``PYTHONPATH`` or
``PYSPARK_PYTHON`` setting::

    archive = package_archive("/tmp/shoal_pkg.tar.gz")
    spark = SparkSession.builder.config("spark.archives", f"{archive}#{ARCHIVE_ALIAS}").getOrCreate()

The archive holds the package the driver runs, so tasks (pickled by reference to shoal's
functions) find the same code on the workers. Its extension is built for this machine's platform:
executors need the same OS and CPU architecture, a CPython >= 3.10, and shoal's dependencies
(pyarrow, numpy; pandas for PySpark's Arrow functions) installed.
"""

from __future__ import annotations

import os
import tarfile
import zipfile
from pathlib import Path

from shoal.errors import InvalidArgumentError

# The ``#alias`` the archive must be shipped under: the directory it unpacks into is the package.
ARCHIVE_ALIAS = "shoal"
# Archive formats Spark unpacks, by file name ending.
_TAR_MODES = {".tar.gz": "w:gz", ".tgz": "w:gz", ".tar": "w"}


def package_archive(path: str | os.PathLike[str]) -> Path:
    """Writes the installed shoal package to the archive ``path`` and returns its absolute path.

    The archive holds the files a shoal wheel installs into ``shoal/`` (Python modules, type stubs
    and the compiled extension; no ``__pycache__``), at its root, so that Spark unpacking it under
    the alias :data:`ARCHIVE_ALIAS` makes a package directory named ``shoal``. The format follows
    the name: ``.tar.gz``, ``.tgz``, ``.tar`` (no compression: the fastest to build) or ``.zip``.
    Ship it with ``spark.archives`` (or ``spark-submit --archives``) as ``<path>#shoal``.
    """
    dest = Path(path).absolute()
    name = dest.name.lower()
    tar_mode = next((mode for end, mode in _TAR_MODES.items() if name.endswith(end)), None)
    if tar_mode is None and not name.endswith(".zip"):
        raise InvalidArgumentError(
            f"archive {str(dest)!r}: expected a name ending in .tar.gz, .tgz, .tar or .zip"
        )
    files = _package_files()
    dest.parent.mkdir(parents=True, exist_ok=True)
    if tar_mode is None:
        with zipfile.ZipFile(dest, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6) as zf:
            for arcname, file in files:
                zf.write(file, arcname)
    else:
        # Level 6 packs the extension about as small as 9 does, in a fraction of the time.
        options = {"compresslevel": 6} if tar_mode == "w:gz" else {}
        with tarfile.open(dest, tar_mode, **options) as tf:  # type: ignore[call-overload]
            for arcname, file in files:
                tf.add(file, arcname, recursive=False)
    return dest


def _package_files() -> list[tuple[str, Path]]:
    """(name in the archive, file) for every file of the installed package, sorted by name.
    Names are relative to the package directory, without a leading ``./`` (Spark refuses to
    unpack entries that name the archive's own root)."""
    import shoal
    from shoal import _native

    root = Path(shoal.__file__).parent
    native = Path(_native.__file__)
    if native.parent != root:
        # Not a copy we can ship whole: the extension lives outside the package directory.
        raise InvalidArgumentError(f"shoal's extension {native} is not inside the package at {root}")
    files = [
        (p.relative_to(root).as_posix(), p)
        for p in root.rglob("*")
        if p.is_file() and "__pycache__" not in p.relative_to(root).parts and p.suffix != ".pyc"
    ]
    return sorted(files)
