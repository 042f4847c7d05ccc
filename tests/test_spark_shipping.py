"""Shipping shoal to Spark executors that do not have it installed (``spark.archives``).

The cluster here is Spark's ``local-cluster`` master: an in-process master and worker that start
each executor in a JVM of its own, with a working directory of its own, fetching the application's
files and archives from the driver as a cluster's executors do. Its Python workers run an
interpreter that has pyarrow, numpy, pandas and pyspark but not shoal. With the archive of
:func:`shoal.spark.shipping.package_archive` in ``spark.archives`` (alias ``shoal``), a Spark
insert and upsert and both read paths (``shoal.spark.read`` and the ``shoal`` data source, which
also starts Python workers on the driver) run; every worker imports shoal from the unpacked
archive, and cannot import it without (the same interpreter and environment outside that
directory); the rows equal what the local reader, hudi-rs and a model of the writes give.

The driver runs in a subprocess (this file as a script): a driver process holds one JVM, and the
test run's shared session (``local[2,3]``) lives in pytest's.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

CITIES = ["sf", "nyc", "chennai"]
COLUMNS = ["id", "city", "ts", "fare"]
TABLE_OPTIONS = {
    "table_name": "shipped",
    "record_key": "id",
    "partition_by": "city",
    "ordering_field": "ts",
}
# One executor with one core and 1 GiB: the smallest real cluster.
MASTER = "local-cluster[1,1,1024]"
JOB_TIMEOUT_S = 600


def first_writes() -> list[tuple[int, str, int, float]]:
    """The rows of the first write (an insert of 24 keys)."""
    return [(i, CITIES[i % 3], 100 + i, i * 1.5) for i in range(24)]


def upserts() -> list[tuple[int, str, int, float]]:
    """The upsert: updates of every third key, new keys 24..33, and a late update of key 1
    (ordering value below the stored one, so the stored row stays)."""
    rows = [(i, CITIES[i % 3], 200 + i, -float(i)) for i in range(0, 34, 3)]
    rows += [(i, CITIES[i % 3], 200 + i, float(i)) for i in range(25, 34, 3)]
    rows.append((1, CITIES[1], 50, 999.0))
    return rows


def model_rows() -> list[dict]:
    """The table after both writes, by the ordering field (greatest ``ts`` wins)."""
    table: dict[int, tuple[int, str, int, float]] = {}
    for row in first_writes() + upserts():
        if row[0] not in table or row[2] >= table[row[0]][2]:
            table[row[0]] = row
    return [dict(zip(COLUMNS, table[k], strict=True)) for k in sorted(table)]


# ---- the archive ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["shoal.tar.gz", "shoal.tar", "shoal.zip"])
def test_package_archive_holds_the_installed_package(tmp_path, name):
    import shoal
    from shoal import _native
    from shoal.spark.shipping import package_archive

    archive = package_archive(tmp_path / "out" / name)
    assert archive == (tmp_path / "out" / name).absolute()
    if name.endswith(".zip"):
        with zipfile.ZipFile(archive) as zf:
            names = zf.namelist()
            native = zf.read(Path(_native.__file__).name)
    else:
        with tarfile.open(archive) as tf:
            names = tf.getnames()
            member = tf.extractfile(Path(_native.__file__).name)
            assert member is not None
            native = member.read()
    root = Path(shoal.__file__).parent
    expected = sorted(
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    )
    assert sorted(names) == expected
    # The package's files at the root, no "./" entries (Spark refuses to unpack those).
    assert "__init__.py" in names and "spark/shipping.py" in names
    assert not any(n.startswith(("./", "/", "shoal/")) or "__pycache__" in n for n in names)
    assert native == Path(_native.__file__).read_bytes()


def test_package_archive_rejects_a_format_spark_does_not_unpack(tmp_path):
    from shoal.errors import InvalidArgumentError
    from shoal.spark.shipping import package_archive

    with pytest.raises(InvalidArgumentError, match=r"\.tar\.gz"):
        package_archive(tmp_path / "shoal.whl")
    assert not (tmp_path / "shoal.whl").exists()


def test_the_extension_cannot_be_imported_from_a_zip(tmp_path, bare_python):
    """Why ``--py-files`` cannot ship shoal: on ``sys.path`` as a zip (what ``--py-files`` does
    with a .zip or .egg; a .whl is not even put on the path), the Python modules import and the
    compiled extension does not."""
    from shoal.spark.shipping import package_archive

    flat = package_archive(tmp_path / "flat.zip")
    zipped = tmp_path / "shoal.zip"
    with zipfile.ZipFile(flat) as src, zipfile.ZipFile(zipped, "w") as dst:
        for info in src.infolist():
            dst.writestr("shoal/" + info.filename, src.read(info))
    # zipimport finds the package's modules in the zip, not its extension: importing shoal fails.
    probe = (
        "import sys, zipimport\n"
        "package = zipimport.zipimporter(sys.argv[1] + '/shoal/')\n"
        "assert package.find_spec('errors') is not None\n"
        "assert package.find_spec('_native') is None\n"
        "import shoal\n"
    )
    env = {**_clean_env(), "PYTHONPATH": str(zipped)}
    done = subprocess.run(
        [str(bare_python), "-c", probe, str(zipped)], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode != 0
    assert "ImportError: cannot import name '_native' from partially initialized module 'shoal'" in (
        done.stderr
    ), done.stderr


# ---- the cluster -----------------------------------------------------------------------------


def _clean_env() -> dict[str, str]:
    """This process's environment without what would let a worker find shoal or change how
    Spark starts: on local-cluster, executors inherit the driver's environment."""
    drop = {"PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "SPARK_HOME", "SPARK_CONF_DIR"}
    return {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("PYSPARK_")}


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory) -> Path:
    """An interpreter with this environment's packages except shoal: a fresh virtual
    environment whose path holds a view of this one's site-packages without shoal's entries
    (its ``.pth`` file for a development install, or an installed ``shoal/``) and without any
    ``.pth`` file."""
    import numpy
    import pyarrow

    root = tmp_path_factory.mktemp("bare")
    view = root / "deps"
    view.mkdir()
    sources = {Path(pyarrow.__file__).parents[1], Path(numpy.__file__).parents[1]}
    for site in sorted(sources):
        for entry in site.iterdir():
            name = entry.name.lower()
            if name.startswith("shoal") or name.endswith(".pth") or (view / entry.name).exists():
                continue
            (view / entry.name).symlink_to(entry)
    env_dir = root / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(env_dir)],
        check=True,
        env=_clean_env(),
        timeout=120,
    )
    python = env_dir / "bin" / "python"
    site_dirs = list((env_dir / "lib").glob("python*/site-packages"))
    assert len(site_dirs) == 1, site_dirs
    (site_dirs[0] / "deps.pth").write_text(f"{view}\n")
    done = subprocess.run(
        [str(python), "-c", "import pyarrow, numpy, pandas, pyspark; import shoal"],
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "ModuleNotFoundError: No module named 'shoal'" in done.stderr, done.stderr
    return python


@pytest.fixture(scope="module")
def spark_home(tmp_path_factory) -> Path:
    """A Spark home for the cluster: the pyspark package's ``bin``, ``jars`` and ``python``,
    linked. local-cluster puts the executors' working directories in ``<SPARK_HOME>/work``:
    here, not inside the installed pyspark package."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("no Java runtime (java on PATH or JAVA_HOME): Spark cannot start")
    import pyspark

    package = Path(pyspark.__file__).parent
    if not (package / "bin" / "spark-submit").is_file() or not (package / "jars").is_dir():
        pytest.skip(f"pyspark at {package} has no bin/spark-submit or jars/ to start a cluster from")
    home = tmp_path_factory.mktemp("spark_home")
    for name in ("bin", "jars", "python"):
        (home / name).symlink_to(package / name)
    return home


def test_shoal_runs_on_executors_that_import_it_only_from_the_shipped_archive(
    tmp_path, bare_python, spark_home
):
    import shoal
    from tests.hudi_oracle import hudi_rs_read, rows_by

    archive = tmp_path / "shoal_pkg.tar.gz"  # the driver packs the shoal it runs
    table = tmp_path / "table"
    result_file = tmp_path / "result.json"
    env = {
        **_clean_env(),
        "SPARK_HOME": str(spark_home),
        "PYSPARK_PYTHON": str(bare_python),
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    args = [sys.executable, __file__, str(archive), str(table), str(tmp_path / "local"), str(result_file)]
    done = subprocess.run(
        args,
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=JOB_TIMEOUT_S,
    )
    assert done.returncode == 0, done.stdout[-20_000:]
    result = json.loads(result_file.read_text())

    # Every executor's Python worker ran the interpreter without shoal, which outside the
    # directory the archive was unpacked into cannot import shoal even with the worker's
    # environment; it imported shoal (and its extension) from that directory, an unpacked copy
    # of the archive in the executor's working directory under <SPARK_HOME>/work ...
    installed = Path(shoal.__file__).resolve().parent
    work = (spark_home / "work").resolve()
    assert len(result["executors"]) == 2, result
    for row in result["executors"]:
        assert row["error"] == "" and row["python"] == str(bare_python), row
        assert row["elsewhere"] == "ModuleNotFoundError: No module named 'shoal'", row
        package_dir = Path(row["package"]).resolve().parent
        assert package_dir.name == "shoal" and package_dir.is_relative_to(work), row
        assert Path(row["native"]).resolve().parent == package_dir, row
        assert package_dir != installed
    # ... and on the driver, in the SparkFiles directory under spark.local.dir.
    driver_dir = Path(result["driver_worker_shoal"]).resolve().parent
    assert driver_dir.name == "shoal", driver_dir
    assert driver_dir.is_relative_to((tmp_path / "local").resolve()), driver_dir

    # The rows: Spark read, data source read, local read, hudi-rs and the model agree.
    expected = model_rows()
    assert result["spark_read"] == expected
    assert result["datasource_read"] == expected
    assert rows_by(shoal.Table(table).read(), COLUMNS, ["id"]) == expected
    assert rows_by(hudi_rs_read(str(table)), COLUMNS, ["id"]) == expected
    assert len(shoal.Table(table).timeline) == 2


# ---- the driver (this file run as a script) ----------------------------------------------------


def _where_is_shoal(batches):
    """A mapInArrow function: the worker's interpreter, where it imported shoal and its extension
    from (or the import error), and what the same interpreter with the same environment says to
    ``import shoal`` outside the directory Spark unpacked the archive into. Defined in the
    script, so cloudpickle ships it by value (the workers do not import this module)."""
    import subprocess
    import sys
    import tempfile

    import pyarrow as pa

    for _ in batches:
        pass
    row = {"python": sys.executable, "package": "", "native": "", "error": ""}
    try:
        import shoal
        from shoal import _native

        row.update(package=shoal.__file__, native=_native.__file__)
    except ImportError as exc:
        row["error"] = f"{type(exc).__name__}: {exc}"
    with tempfile.TemporaryDirectory() as elsewhere:
        alone = subprocess.run(
            [sys.executable, "-c", "import shoal"], cwd=elsewhere, capture_output=True, text=True
        )
    row["elsewhere"] = alone.stderr.strip().splitlines()[-1] if alone.returncode else "imported"
    yield pa.RecordBatch.from_pylist([row])


def _session(local_dir: str, archive: str):
    from shoal.spark import local_session
    from shoal.spark.shipping import ARCHIVE_ALIAS

    conf = {
        # The recipe under test: the package archive, unpacked as a directory named "shoal".
        "spark.archives": f"{archive}#{ARCHIVE_ALIAS}",
        "spark.local.dir": local_dir,
        # Fail at the first task error (a cluster master retries 4 times by default).
        "spark.task.maxFailures": "1",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "2",
    }
    spark = local_session(MASTER, app_name="shoal-shipping", conf=conf, fast_start=True)
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _probe_source():
    """A data source whose schema is computed in the Python worker Spark starts on the driver:
    its one column is named after where that worker imported shoal from."""
    from pyspark.sql.datasource import DataSource, DataSourceReader
    from pyspark.sql.types import StringType, StructField, StructType

    class Reader(DataSourceReader):
        def read(self, partition):
            yield ("",)

    class ShoalLocation(DataSource):
        @classmethod
        def name(cls):
            return "shoal_location"

        def schema(self):
            import shoal

            return StructType([StructField(shoal.__file__, StringType())])

        def reader(self, schema):
            return Reader()

    return ShoalLocation


def _job(archive: str, table: str, local_dir: str, result_file: str) -> None:
    import shoal.spark

    shoal.spark.package_archive(archive)
    spark = _session(local_dir, archive)
    probe = spark.range(0, 2, 1, 2).mapInArrow(
        _where_is_shoal, "python string, package string, native string, error string, elsewhere string"
    )
    out: dict = {"executors": [r.asDict() for r in probe.collect()]}
    schema = "id long, city string, ts long, fare double"
    shoal.spark.write(spark.createDataFrame(first_writes(), schema), table, "insert", **TABLE_OPTIONS)
    shoal.spark.write(spark.createDataFrame(upserts(), schema), table, "upsert")
    # Sorted here: Spark's orderBy would run one more job (sampling the keys' range).
    read = shoal.spark.read(spark, table, columns=COLUMNS).collect()
    out["spark_read"] = sorted((r.asDict() for r in read), key=lambda r: r["id"])
    shoal.spark.register(spark)
    loaded = spark.read.format("shoal").load(table).select(*COLUMNS).collect()
    out["datasource_read"] = sorted((r.asDict() for r in loaded), key=lambda r: r["id"])
    spark.dataSource.register(_probe_source())
    out["driver_worker_shoal"] = spark.read.format("shoal_location").load().columns[0]
    spark.stop()
    Path(result_file).write_text(json.dumps(out))


if __name__ == "__main__":
    _job(*sys.argv[1:5])
