"""`market-spread object-store` (contract 3c): a real S3 server that real clients use, boto3,
delta-rs and Spark's S3A connector, and the put-if-absent that delta-rs' commits and the driver's own
(lake.commits) rely on."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap

import pytest

from tests.helpers.processes import stop
from tests.helpers.s3 import MARKET_SPREAD, READY, start_object_store


def _code(exc: Exception) -> str:
    return str(getattr(exc, "response", {}).get("Error", {}).get("Code", ""))


def test_ready_with_its_bucket(object_store) -> None:
    names = [b["Name"] for b in object_store.client().list_buckets()["Buckets"]]
    assert object_store.bucket in names
    ready = next(line for line in object_store.log.read_text().splitlines() if line.startswith(READY))
    assert ready == (
        f"{READY}{object_store.endpoint} (buckets {object_store.bucket}; "
        f"AWS_ACCESS_KEY_ID={object_store.env['AWS_ACCESS_KEY_ID']}, "
        f"AWS_SECRET_ACCESS_KEY={object_store.env['AWS_SECRET_ACCESS_KEY']})"
    )
    # The bucket is a top folder of the data folder; the properties file (it holds the secret) is elsewhere.
    assert (object_store.data / object_store.bucket).is_dir()
    assert not [p for p in object_store.data.rglob("*") if p.name.endswith(".properties")]


def test_put_if_absent_refuses_a_second_put(object_store) -> None:
    s3, key = object_store.client(), object_store.uri("once").split("/", 3)[3] + "/object"
    s3.put_object(Bucket=object_store.bucket, Key=key, Body=b"first", IfNoneMatch="*")
    with pytest.raises(Exception) as refused:
        s3.put_object(Bucket=object_store.bucket, Key=key, Body=b"second", IfNoneMatch="*")
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412, _code(refused.value)
    assert s3.get_object(Bucket=object_store.bucket, Key=key)["Body"].read() == b"first"


def test_delta_rs_never_overwrites_a_commit(object_store) -> None:
    """A concurrent writer's commit lands between delta-rs reading the table and committing: delta-rs
    must not overwrite it (it retries at the next version, or fails)."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    uri, options = object_store.uri("delta-rs"), object_store.config.delta_rs_options()
    write_deltalake(uri, pa.table({"n": [1, 2]}), storage_options=options)
    table = DeltaTable(uri, storage_options=options)  # read at version 0
    assert table.version() == 0
    key = uri.split("/", 3)[3] + "/_delta_log/00000000000000000001.json"
    foreign = (
        json.dumps(
            {
                "commitInfo": {
                    "timestamp": 1,
                    "operation": "WRITE",
                    "isBlindAppend": True,
                    "operationParameters": {"mode": "Append"},
                }
            }
        ).encode()
        + b"\n"
    )
    s3 = object_store.client()
    s3.put_object(Bucket=object_store.bucket, Key=key, Body=foreign, IfNoneMatch="*")
    try:
        write_deltalake(table, pa.table({"n": [3]}), mode="append")
        failed = False
    except Exception:  # noqa: BLE001 - a refused commit is an acceptable outcome; an overwrite is not
        failed = True
    assert s3.get_object(Bucket=object_store.bucket, Key=key)["Body"].read() == foreign
    latest = DeltaTable(uri, storage_options=options)
    if not failed:
        assert latest.version() == 2
        assert sorted(latest.to_pyarrow_table()["n"].to_pylist()) == [1, 2, 3]


def test_the_drivers_commit_never_overwrites_one_on_the_server(object_store) -> None:
    """The stream's commits on S3 are delta-rs's, put-if-absent (`If-None-Match: *`): a commit it did
    not know of, made between two of its own, stays as it was, and the stream's next commit lands
    after it, its rows all there."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    from market_spread.lake.lake_tables import LakeTables

    uri, options = object_store.uri("own-commits"), object_store.config.delta_rs_options()
    lake, name = uri.rsplit("/", 1)
    write_deltalake(uri, pa.table({"n": pa.array([1], pa.int64())}), storage_options=options)
    with object_store.environ():
        tables = LakeTables(lake)
        tables.append(name, pa.table({"n": pa.array([2], pa.int64())}), 1)  # version 1
        key = uri.split("/", 3)[3] + "/_delta_log/00000000000000000002.json"
        foreign = json.dumps({"commitInfo": {"timestamp": 1, "operation": "WRITE"}}).encode() + b"\n"
        s3 = object_store.client()
        s3.put_object(Bucket=object_store.bucket, Key=key, Body=foreign, IfNoneMatch="*")
        tables.append(name, pa.table({"n": pa.array([3], pa.int64())}), 2)
        tables.forget()
    assert s3.get_object(Bucket=object_store.bucket, Key=key)["Body"].read() == foreign
    latest = DeltaTable(uri, storage_options=options)
    assert latest.version() == 3 and latest.transaction_version("market-spread") == 2
    assert sorted(latest.to_pyarrow_table()["n"].to_pylist()) == [1, 2, 3]


def test_port_in_use_is_one_line_and_exit_1(object_store) -> None:
    port = object_store.endpoint.rsplit(":", 1)[1]
    done = subprocess.run(
        [str(MARKET_SPREAD), "object-store", "--port", port, "--data", str(object_store.data)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert done.stderr.strip() == f"market-spread object-store: error: port {port} on 127.0.0.1 is already in use"


def test_sigterm_stops_the_server(tmp_path) -> None:
    store = start_object_store(tmp_path / "data", tmp_path / "out.log", bucket="other-bucket")
    assert (tmp_path / "data" / "other-bucket").is_dir()
    port = int(store.endpoint.rsplit(":", 1)[1])
    stop(store.process, signal.SIGTERM, timeout=30)
    assert store.process.returncode == 0, store.log.read_text()[-2000:]
    assert store.log.read_text().rstrip().endswith("market-spread object-store: stopped")
    with socket.socket() as sock:  # nothing listens on the port, and a new server may bind it
        assert sock.connect_ex(("127.0.0.1", port)) != 0
    with socket.socket() as sock:  # (as servers do, past the closed connections' TIME_WAIT)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))


SPARK_ON_S3A = textwrap.dedent("""
    import sys
    from market_spread.runtime.spark import build_session, s3_jars
    spark = build_session("s3a-test", master="local[1]", shuffle_partitions=1)
    jars = spark.conf.get("spark.jars")
    assert all(j in jars for j in s3_jars()), jars
    table = sys.argv[1]
    spark.createDataFrame([(1, "a"), (2, "b")], "id INT, v STRING").write.format("delta").save(table)
    spark.createDataFrame([(2, "B"), (3, "c")], "id INT, v STRING").createOrReplaceTempView("src")
    spark.sql(f"MERGE INTO delta.`{table}` t USING src s ON t.id = s.id "
              "WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT *")
    rows = sorted(tuple(r) for r in spark.read.format("delta").load(table).collect())
    print("ROWS", rows)
    spark.stop()
""")


@pytest.mark.slow
def test_spark_delta_on_s3a(object_store, tmp_path) -> None:
    """hadoop-aws with the small AWS SDK set (.cache/s3-jars) writes, merges and reads a Delta table."""
    table = object_store.uri("spark").replace("s3://", "s3a://", 1)
    done = subprocess.run(
        [sys.executable, "-c", SPARK_ON_S3A, table],
        capture_output=True,
        text=True,
        env={**os.environ, **object_store.env},
        timeout=600,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert "ROWS [(1, 'a'), (2, 'B'), (3, 'c')]" in done.stdout
    keys = [
        o["Key"]
        for o in object_store.client().list_objects_v2(
            Bucket=object_store.bucket, Prefix=table.split("/", 3)[3] + "/_delta_log/"
        )["Contents"]
    ]
    assert any(k.endswith("00000000000000000001.json") for k in keys), keys
