"""``sharebench runs fetch RUN_ID --out DIR``: a Kubeflow run's results folder(s), from the object store.

KFP v2 writes every output artifact under its pipeline root in the deployment's object store (KFP's
default: the in-cluster MinIO, bucket ``mlpipeline``, root ``v2/artifacts``) at
``<root>/<pipeline name>/<run id>/<task>/<execution id>/<output>``. The results folder of a run is the
``results`` output of its ``collect-results`` task(s): one for the sweep pipeline, one per node for the
multi-node pipeline. They are read through the store's S3 API (boto3), so MinIO, Ceph or AWS S3 all do;
``sharebench report DIR`` then builds the report from the copy.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import boto3
import botocore.exceptions

from sharebench.errors import UserError

RESULTS_TASK = "collect-results"
RESULTS_OUTPUT = "results"


@dataclass(frozen=True)
class Store:
    """Where the deployment keeps its artifacts (S3 API)."""

    endpoint: str | None  # e.g. http://localhost:9000 (a port-forward of svc/minio-service); None: AWS
    bucket: str = "mlpipeline"
    root: str = "v2/artifacts"
    region: str | None = None


def results_keys(keys: list[str], root: str, run_id: str) -> dict[str, list[str]]:
    """The keys of each ``collect-results`` results folder of a run: {execution id: [keys]}."""
    root = root.strip("/")
    pattern = re.compile(
        rf"^{re.escape(root)}/[^/]+/{re.escape(run_id)}/(?:.*/)?{RESULTS_TASK}/([^/]+)/"
        rf"{RESULTS_OUTPUT}/.+"
    )
    found: dict[str, list[str]] = {}
    for key in keys:
        m = pattern.match(key)
        if m:
            found.setdefault(m.group(1), []).append(key)
    return found


def target_folders(groups: dict[str, list[str]], out: Path) -> dict[str, Path]:
    """One results folder: ``out`` itself; several (multi-node): ``out/node-1``, ``out/node-2``, … in
    execution order."""
    ids = sorted(groups, key=lambda x: (len(x), x))
    if len(ids) == 1:
        return {ids[0]: out}
    return {eid: out / f"node-{i}" for i, eid in enumerate(ids, 1)}


@contextlib.contextmanager
def _s3_errors(store: Store):
    where = f"s3://{store.bucket}/{store.root.strip('/')}" + (f" at {store.endpoint}" if store.endpoint else "")
    try:
        yield
    except botocore.exceptions.EndpointConnectionError as exc:
        raise UserError(
            f"cannot reach the object store {store.endpoint!r} ({exc}); check --s3-endpoint "
            "(e.g. kubectl -n kubeflow port-forward svc/minio-service 9000:9000)"
        ) from None
    except botocore.exceptions.NoCredentialsError:
        raise UserError(
            f"no credentials for {where}: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
            "(KFP's MinIO: the mlpipeline-minio-artifact secret)"
        ) from None
    except botocore.exceptions.ClientError as exc:
        err = exc.response.get("Error", {})
        raise UserError(f"{where} refused: {err.get('Code', '?')} ({err.get('Message', exc)})") from None


def fetch_results(
    store: Store, run_id: str, out: Path, pipeline_name: str | None = None, state: str | None = None
) -> list[Path]:
    """Copy the run's results folder(s) into ``out``; returns the folders written."""
    client = boto3.client("s3", endpoint_url=store.endpoint, region_name=store.region or "us-east-1")
    root = store.root.strip("/")
    prefix = f"{root}/{pipeline_name}/{run_id}/" if pipeline_name else f"{root}/"
    with _s3_errors(store):
        keys = [
            obj["Key"]
            for page in client.get_paginator("list_objects_v2").paginate(Bucket=store.bucket, Prefix=prefix)
            for obj in page.get("Contents", [])
        ]
        groups = results_keys(keys, root, run_id)
        if not groups:
            raise UserError(
                f"run {run_id}{f' ({state})' if state else ''} has no {RESULTS_TASK} results under "
                f"s3://{store.bucket}/{prefix}; has it finished, and is --s3-root the pipeline root?"
            )
        written = []
        for eid, folder in target_folders(groups, out).items():
            base = PurePosixPath(
                groups[eid][0].split(f"/{RESULTS_TASK}/{eid}/{RESULTS_OUTPUT}/", 1)[0],
                RESULTS_TASK,
                eid,
                RESULTS_OUTPUT,
            )
            for key in groups[eid]:
                rel = PurePosixPath(key).relative_to(base)
                dest = folder.joinpath(*rel.parts)
                dest.parent.mkdir(parents=True, exist_ok=True)
                client.download_file(store.bucket, key, str(dest))
            written.append(folder)
    return written
