"""Where the history lives: a local folder or an ``s3://bucket/prefix`` (any S3 API: MinIO, Ceph, AWS).

Layout (the same in both)::

    runs/<time>_<node>_<run id>.csv        one immutable file per added run (records.HISTORY_COLUMNS)
    accepted/<time>_<hash>.json            one per ``history accept``: a new baseline starts there

A run's file is named from its own content (the hash of its results.csv), so adding a run twice
writes nothing the second time and two runs never write one object. A local file is written under a
hidden temporary name and renamed into place (``sharebench.files.write_atomic``); readers skip hidden
names, so a killed ``add`` leaves nothing they see. On S3 a single PUT is atomic.
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pandas as pd

from sharebench.errors import UserError
from sharebench.files import write_atomic
from sharebench.history.records import HISTORY_COLUMNS, HISTORY_SCHEMA_VERSION, RunRows
from sharebench.history_settings import store_location

RUNS = "runs"
ACCEPTED = "accepted"


class Store(Protocol):
    """The few operations a history needs; every store is used only through them."""

    @property
    def url(self) -> str: ...

    def names(self, folder: str) -> list[str]: ...

    def read(self, folder: str, name: str) -> bytes: ...

    def exists(self, folder: str, name: str) -> bool: ...

    def put(self, folder: str, name: str, data: bytes) -> None: ...


@dataclass
class LocalStore:
    root: Path

    @property
    def url(self) -> str:
        return str(self.root)

    def names(self, folder: str) -> list[str]:
        d = self.root / folder
        return sorted(p.name for p in d.iterdir() if p.is_file() and not p.name.startswith(".")) if d.is_dir() else []

    def read(self, folder: str, name: str) -> bytes:
        return (self.root / folder / name).read_bytes()

    def exists(self, folder: str, name: str) -> bool:
        return (self.root / folder / name).is_file()

    def put(self, folder: str, name: str, data: bytes) -> None:
        d = self.root / folder
        try:
            d.mkdir(parents=True, exist_ok=True)
            write_atomic(d / name, data, fsync=True)
        except OSError as exc:
            raise UserError(
                f"cannot write to the history store {self.root} ({exc.strerror}); give a writable folder"
            ) from None


@dataclass
class S3Store:
    bucket: str
    prefix: str
    endpoint: str | None = None
    region: str | None = None

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}".rstrip("/")

    def _client(self) -> Any:
        try:
            import boto3  # noqa: PLC0415 - optional (the history and kfp extras): only for an s3:// store
        except ImportError:
            raise UserError(f"{self.url}: an s3:// store needs boto3 (pip install 'sharebench[history]')") from None
        return boto3.client("s3", endpoint_url=self.endpoint, region_name=self.region or "us-east-1")

    def _key(self, folder: str, name: str = "") -> str:
        return "/".join(p for p in (self.prefix.strip("/"), folder, name) if p)

    def names(self, folder: str) -> list[str]:
        client, prefix = self._client(), self._key(folder) + "/"
        with s3_errors(self):
            pages = client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix)
            keys = [o["Key"] for page in pages for o in page.get("Contents", [])]
        return sorted(k[len(prefix) :] for k in keys if "/" not in k[len(prefix) :])

    def read(self, folder: str, name: str) -> bytes:
        with s3_errors(self):
            body: bytes = self._client().get_object(Bucket=self.bucket, Key=self._key(folder, name))["Body"].read()
        return body

    def exists(self, folder: str, name: str) -> bool:
        return name in self.names(folder)

    def put(self, folder: str, name: str, data: bytes) -> None:
        with s3_errors(self):
            self._client().put_object(Bucket=self.bucket, Key=self._key(folder, name), Body=data)


@contextlib.contextmanager
def s3_errors(store: S3Store) -> Iterator[None]:
    """botocore's errors as one line naming the store and what to do."""
    import botocore.exceptions  # noqa: PLC0415 - optional, with boto3: only for an s3:// store

    where = store.url + (f" at {store.endpoint}" if store.endpoint else "")
    try:
        yield
    except botocore.exceptions.EndpointConnectionError as exc:
        raise UserError(f"cannot reach the object store {store.endpoint!r} ({exc}); check --s3-endpoint") from None
    except botocore.exceptions.NoCredentialsError:
        raise UserError(f"no credentials for {where}: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY") from None
    except botocore.exceptions.ClientError as exc:
        err = exc.response.get("Error", {})
        raise UserError(f"{where} refused: {err.get('Code', '?')} ({err.get('Message', exc)})") from None


def open_store(text: str, *, endpoint: str | None = None, create: bool = False) -> Store:
    """A store from what the user typed (``history.options.store_location``); UserError for anything that is
    neither a folder nor s3://."""
    where = store_location(text, create=create)
    if where.root is None:
        return S3Store(bucket=where.bucket, prefix=where.prefix, endpoint=endpoint or None)
    return LocalStore(where.root)


def add_run(store: Store, run: RunRows) -> bool:
    """Write the run's file; False (nothing written) when the store already holds it."""
    if store.exists(RUNS, run.file_name):
        return False
    store.put(RUNS, run.file_name, run.rows.to_csv(index=False).encode())
    return True


def load_runs(store: Store) -> pd.DataFrame:
    """Every run's rows, oldest first (HISTORY_COLUMNS)."""
    frames = []
    for name in store.names(RUNS):
        if not name.endswith(".csv"):
            continue
        frame = pd.read_csv(io.BytesIO(store.read(RUNS, name)), keep_default_na=False, dtype=str)
        version = frame["schema_version"].iloc[0] if len(frame) and "schema_version" in frame else "1"
        if int(version) > HISTORY_SCHEMA_VERSION:
            raise UserError(f"{store.url}/{RUNS}/{name} has history schema {version}; update sharebench to read it")
        frames.append(frame)
    if not frames:
        return pd.DataFrame(columns=HISTORY_COLUMNS)
    out = pd.concat(frames, ignore_index=True)
    for col in HISTORY_COLUMNS:  # a run of an older schema lacks the newer columns: empty there
        out[col] = out[col].fillna("") if col in out.columns else ""
    for col in ("particles", "turns", "repeats"):
        out[col] = pd.to_numeric(out[col], errors="coerce").astype("Int64")
    for col in ("loss_pct", "loss_ci_low", "loss_ci_high", "rate_pt_per_s"):
        out[col] = pd.to_numeric(out[col], errors="coerce")
    return out.sort_values(["time_utc", "run_id"], kind="stable").reset_index(drop=True)


def put_accept(store: Store, accept: dict[str, Any], name: str) -> None:
    store.put(ACCEPTED, name, (json.dumps(accept, sort_keys=True) + "\n").encode())


def load_accepts(store: Store) -> list[dict[str, Any]]:
    """Every accepted change, in the order they were made."""
    return [json.loads(store.read(ACCEPTED, n)) for n in store.names(ACCEPTED) if n.endswith(".json")]
