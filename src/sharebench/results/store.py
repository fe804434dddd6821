"""Every JSON document sharebench writes and reads, through one pair of functions.

``write_json(path, kind, data)`` writes ``{"kind": kind, "schema_version": N, **data}`` atomically;
``read_json(path, kind)`` checks kind and version and returns the data without those two keys,
upgraded to the version this sharebench writes. A newer version says "upgrade sharebench"; a file
that is not JSON, or another kind, says so in one line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sharebench.errors import UserError
from sharebench.files import write_atomic
from sharebench.results.schema import DOCUMENTS

ENVELOPE = ("kind", "schema_version")


def write_json(path: str | os.PathLike, kind: str, data: dict[str, Any], *, fsync: bool = False) -> Path:
    """Write the document ``data`` of ``kind`` at ``path`` (whole or not at all); returns the path."""
    doc = {"kind": kind, "schema_version": DOCUMENTS[kind]}
    doc.update((k, v) for k, v in data.items() if k not in ENVELOPE)
    return write_atomic(path, json.dumps(doc, indent=2, default=str) + "\n", fsync=fsync)


def document_version(doc: dict[str, Any], kind: str) -> int:
    """The schema version a document was written with, the first release's spellings included."""
    if "schema_version" in doc:
        return int(doc["schema_version"])
    legacy = doc.get("schema")  # provenance, first release: "sharebench.provenance/1"
    if isinstance(legacy, str) and legacy.startswith(f"sharebench.{kind}/"):
        return int(legacy.rsplit("/", 1)[1])
    if "record_version" in doc:  # a replica's record, first release
        return int(doc["record_version"])
    return 1  # sweep.json of the first release carried no version


def read_json(path: str | os.PathLike, kind: str) -> dict[str, Any]:
    """The document of ``kind`` at ``path``, upgraded to the current version (see :data:`UPGRADES`)."""
    p = Path(path)
    try:
        doc = json.loads(p.read_text())
    except json.JSONDecodeError as exc:
        raise UserError(
            f"{p} is not valid JSON ({exc.msg} at line {exc.lineno}); re-run what wrote it or delete the file"
        ) from None
    except OSError as exc:
        raise UserError(f"cannot read {p}: {exc.strerror or exc}") from None
    if (
        not isinstance(doc, dict)
        or doc.get("kind", kind) != kind
        or ("schema" in doc and not str(doc["schema"]).startswith(f"sharebench.{kind}/"))
    ):
        found = doc.get("kind") or doc.get("schema") if isinstance(doc, dict) else type(doc).__name__
        raise UserError(f"{p} is not a sharebench {kind} document (it holds {found!r})")
    try:
        version = document_version(doc, kind)
    except (TypeError, ValueError):
        raise UserError(f"{p} has an unreadable schema version; re-run what wrote it") from None
    current = DOCUMENTS[kind]
    if version > current:
        raise UserError(
            f"{p} has {kind} schema version {version}; this sharebench reads up to {current}: "
            "upgrade sharebench to read it"
        )
    data = {k: v for k, v in doc.items() if k not in (*ENVELOPE, "schema", "record_version")}
    for v in range(version, current):
        data = UPGRADES[(kind, v)](data)
    return data


def _provenance_1_to_2(old: dict[str, Any]) -> dict[str, Any]:
    """Provenance 1 kept driver versions under ``gpu`` and only the CUDA runtime's version number."""
    new = dict(old)
    gpu = dict(old.get("gpu") or {})
    nvidia: dict[str, Any] = {"available": gpu.get("available"), "reason": gpu.get("reason"), "gpus": []}
    for key in ("driver_version", "cuda_driver_version", "nvml_version"):
        nvidia[key] = gpu.pop(key, None)
    gpu.pop("gpu_count", None)
    if not old.get("gpu"):
        nvidia = {"available": None, "reason": "not recorded (provenance schema 1, not a GPU run)", "gpus": []}
    new["nvidia"] = nvidia
    new["gpu"] = gpu or None
    runtime = new.pop("cuda_runtime_version", None)
    new["cuda_runtime"] = f"CUDA runtime {runtime}" if runtime else None
    host = dict(old.get("host") or {})
    host.setdefault("usable_cores", None)
    host.setdefault("load_avg_1m_5m_15m", None)
    new["host"] = host
    return new


# (kind, version) -> the function that turns a document of that version into the next one
UPGRADES: dict[tuple[str, int], Callable[[dict[str, Any]], dict[str, Any]]] = {
    ("provenance", 1): _provenance_1_to_2,
}
