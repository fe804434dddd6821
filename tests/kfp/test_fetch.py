"""`sharebench runs fetch`: a run's results folders from a real S3 server (moto in server mode, on
loopback, laid out as KFP v2 lays out its MinIO bucket) and the run from the loopback KFP API; then
`sharebench report` builds from the copy."""

from __future__ import annotations

import filecmp
import re
import socket

import pytest

from sharebench.cli import main
from support.paths import ROOT

pytest.importorskip("kfp", reason="kfp not installed (pip install -e '.[kfp]')")
moto_server = pytest.importorskip("moto.server", reason="moto[server] is in the test extra")
boto3 = pytest.importorskip("boto3", reason="boto3 is in the kfp extra")

EXAMPLE = ROOT / "tests" / "data" / "results" / "cpu-example"
ROOT_PREFIX = "v2/artifacts"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def s3_url():
    import logging

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's request log, on stderr otherwise
    port = free_port()
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


@pytest.fixture
def s3(s3_url, monkeypatch):
    """A fresh mlpipeline bucket on the S3 server, and credentials for it."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "minio")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "minio123")
    client = boto3.client("s3", endpoint_url=s3_url, region_name="us-east-1")
    for page in (
        client.get_paginator("list_objects_v2").paginate(Bucket="mlpipeline")
        if "mlpipeline" in [b["Name"] for b in client.list_buckets().get("Buckets", [])]
        else []
    ):
        for obj in page.get("Contents", []):
            client.delete_object(Bucket="mlpipeline", Key=obj["Key"])
    client.create_bucket(Bucket="mlpipeline")
    return client


def upload_folder(client, folder, prefix: str) -> None:
    for path in folder.rglob("*"):
        if path.is_file():
            client.upload_file(str(path), "mlpipeline", f"{prefix}/{path.relative_to(folder).as_posix()}")


def submit(capsys, kfp_server, *params: str) -> str:
    argv = ["submit", "--host", kfp_server.url, "--run-name", "cluster"]
    for p in params:
        argv += ["--param", p]
    assert main(argv) == 0
    out = capsys.readouterr().out
    (run_id,) = re.findall(r"^run (\S+)$", out, re.M)
    return run_id


def fetch(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["runs", "fetch", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_fetch_copies_the_sweep_results_folder_and_the_report_builds(kfp_server, s3, s3_url, tmp_path, capsys):
    if not (EXAMPLE / "results.csv").exists():
        pytest.skip(f"no example results folder at {EXAMPLE}")
    run_id = submit(capsys, kfp_server, "node_name=gpu-node-7")
    other = submit(capsys, kfp_server, "node_name=gpu-node-8")
    base = f"{ROOT_PREFIX}/sharebench-sweep"
    upload_folder(s3, EXAMPLE, f"{base}/{run_id}/collect-results/7301/results")
    # what must not be fetched: another task's output of the run, another run's results
    s3.put_object(Bucket="mlpipeline", Key=f"{base}/{run_id}/write-report/7302/report_html", Body=b"<html>")
    s3.put_object(Bucket="mlpipeline", Key=f"{base}/{other}/collect-results/7401/results/results.csv", Body=b"x")

    out_dir = tmp_path / "fetched"
    code, out, err = fetch(capsys, run_id, "--host", kfp_server.url, "--out", str(out_dir), "--s3-endpoint", s3_url)
    assert code == 0, err
    assert str(out_dir) in out
    files = sorted(p.relative_to(EXAMPLE) for p in EXAMPLE.rglob("*") if p.is_file())
    assert sorted(p.relative_to(out_dir) for p in out_dir.rglob("*") if p.is_file()) == files
    assert all(filecmp.cmp(EXAMPLE / f, out_dir / f, shallow=False) for f in files)
    # the KFP API was asked for the run (its pipeline name narrows the listing)
    assert ("GET", f"/apis/v2beta1/runs/{run_id}") in [(m, p) for m, p, _, _ in kfp_server.requests]

    assert not (out_dir / "report.md").exists()  # the trimmed example has none: the report builds it
    assert main(["report", str(out_dir)]) == 0
    capsys.readouterr()
    assert "loss" in (out_dir / "report.md").read_text().lower()


def test_fetch_puts_each_node_of_a_multi_node_run_in_its_own_folder(kfp_server, s3, s3_url, tmp_path, capsys):
    run_id = submit(capsys, kfp_server, "node_name=a")
    base = f"{ROOT_PREFIX}/sharebench-sweep/{run_id}"
    for eid, node in (("88", "a"), ("120", "b")):  # execution ids; 88 ran first
        s3.put_object(
            Bucket="mlpipeline",
            Key=f"{base}/collect-results/{eid}/results/results.csv",
            Body=f"node\n{node}\n".encode(),
        )
        s3.put_object(Bucket="mlpipeline", Key=f"{base}/collect-results/{eid}/results/cells/c.json", Body=b"{}")
    code, out, err = fetch(capsys, run_id, "--host", kfp_server.url, "--out", str(tmp_path), "--s3-endpoint", s3_url)
    assert code == 0, err
    assert (tmp_path / "node-1" / "results.csv").read_text() == "node\na\n"
    assert (tmp_path / "node-2" / "results.csv").read_text() == "node\nb\n"
    assert (tmp_path / "node-2" / "cells" / "c.json").exists()


def test_fetch_errors_are_one_line(kfp_server, s3, s3_url, tmp_path, capsys):
    run_id = submit(capsys, kfp_server, "node_name=a")
    code, _, err = fetch(capsys, run_id, "--host", kfp_server.url, "--out", str(tmp_path), "--s3-endpoint", s3_url)
    assert code == 2 and err.count("\n") == 1
    assert f"run {run_id}" in err
    assert f"no collect-results results under s3://mlpipeline/v2/artifacts/sharebench-sweep/{run_id}/" in err
    assert not any(tmp_path.iterdir())

    code, _, err = fetch(
        capsys, run_id, "--host", kfp_server.url, "--out", str(tmp_path), "--s3-endpoint", s3_url, "--s3-bucket", "nope"
    )
    assert code == 2 and err.count("\n") == 1 and "NoSuchBucket" in err

    port = free_port()  # nobody listens there
    code, _, err = fetch(
        capsys, run_id, "--host", kfp_server.url, "--out", str(tmp_path), "--s3-endpoint", f"http://127.0.0.1:{port}"
    )
    assert code == 2 and err.count("\n") == 1 and "cannot reach the object store" in err and "--s3-endpoint" in err
