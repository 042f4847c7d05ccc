"""Shared pytest fixtures."""

from __future__ import annotations

import shutil
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

FIXTURES_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures" / "hudi-java"


@pytest.fixture
def fixture_table(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """``fixture_table(name)`` unzips ``shared/fixtures/hudi-java/<name>.zip`` into a fresh temp
    directory and returns the table directory (the one holding ``.hoodie/``), ignoring the
    ``__MACOSX`` resource-fork entries the zips carry. Skips the test when the zip is absent."""

    def unzip(name: str) -> Path:
        src = FIXTURES_DIR / f"{name}.zip"
        if not src.is_file():
            pytest.skip(f"fixture {src} not found")
        dest = tmp_path_factory.mktemp(name)
        with zipfile.ZipFile(src) as z:
            z.extractall(dest, [m for m in z.namelist() if not m.startswith("__MACOSX")])
        roots = [p.parent.parent for p in dest.glob("*/.hoodie/hoodie.properties")]
        assert len(roots) == 1, f"{name}: expected one table root, found {roots}"
        return roots[0]

    return unzip


@pytest.fixture(scope="session")
def spark():
    """One local SparkSession for the whole test run (starting one costs ~10 s): 2 cores, and a
    failed task is tried up to 3 times (``local[2,3]``), so tests can inject task failures."""
    pytest.importorskip("pyspark")
    from shoal.spark import local_session

    # Not the working directory: a test that creates a catalog table would leave it there.
    warehouse = tempfile.mkdtemp(prefix="shoal-tests-warehouse-")
    session = local_session(
        "local[2,3]",
        app_name="shoal-tests",
        conf={"spark.ui.showConsoleProgress": "false", "spark.sql.warehouse.dir": warehouse},
        fast_start=True,
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
    shutil.rmtree(warehouse, ignore_errors=True)
