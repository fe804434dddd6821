"""Test support: a JSON schema for the NVIDIA DRA driver's ``GpuConfig`` opaque parameters, written from
the driver's API types (k8s-dra-driver-gpu, ``api/nvidia.com/resource/v1beta1``: ``gpuconfig.go``,
``sharing.go``).

* ``GpuConfig``: ``apiVersion: resource.nvidia.com/v1beta1``, ``kind: GpuConfig``, optional ``sharing``.
* ``GpuSharing``: ``strategy`` (``TimeSlicing`` | ``MPS``), ``timeSlicingConfig`` only with
  TimeSlicing and ``mpsConfig`` only with MPS (``GetTimeSlicingConfig``/``GetMpsConfig`` refuse the
  other one).
* ``TimeSlicingConfig.interval``: ``Default`` | ``Short`` | ``Medium`` | ``Long``
  (``TimeSliceInterval.Int()`` maps them to 0..3, the ``--set-timeslice`` codes).
* ``MpsConfig``: ``defaultActiveThreadPercentage`` (int), ``defaultPinnedDeviceMemoryLimit`` (a
  ``resource.Quantity``, at least 1 MiB: ``limit.Megabyte()`` refuses less),
  ``defaultPerDevicePinnedMemoryLimit`` (device index or UUID -> quantity).
"""

from __future__ import annotations

import re

import jsonschema

# resource.Quantity in the binary-suffix or plain-integer forms sharebench writes
QUANTITY = r"^[0-9]+(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$"
_FACTORS = {
    "": 1,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
}

MPS_CONFIG = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "defaultActiveThreadPercentage": {"type": "integer", "minimum": 1, "maximum": 100},
        "defaultPinnedDeviceMemoryLimit": {"type": "string", "pattern": QUANTITY},
        "defaultPerDevicePinnedMemoryLimit": {
            "type": "object",
            "propertyNames": {"pattern": r"^([0-9]+|GPU-[0-9a-fA-F-]+)$"},
            "additionalProperties": {"type": "string", "pattern": QUANTITY},
        },
    },
}

GPU_CONFIG = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "additionalProperties": False,
    "required": ["apiVersion", "kind"],
    "properties": {
        "apiVersion": {"const": "resource.nvidia.com/v1beta1"},
        "kind": {"const": "GpuConfig"},
        "sharing": {
            "type": "object",
            "additionalProperties": False,
            "required": ["strategy"],
            "properties": {
                "strategy": {"enum": ["TimeSlicing", "MPS"]},
                "timeSlicingConfig": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {"interval": {"enum": ["Default", "Short", "Medium", "Long"]}},
                },
                "mpsConfig": MPS_CONFIG,
            },
            "allOf": [
                {
                    "if": {"properties": {"strategy": {"const": "TimeSlicing"}}},
                    "then": {"not": {"required": ["mpsConfig"]}},
                },
                {
                    "if": {"properties": {"strategy": {"const": "MPS"}}},
                    "then": {"not": {"required": ["timeSlicingConfig"]}},
                },
            ],
        },
    },
}


def quantity_bytes(q: str) -> int:
    m = re.fullmatch(r"([0-9]+)([A-Za-z]*)", q)
    assert m and m.group(2) in _FACTORS, q
    return int(m.group(1)) * _FACTORS[m.group(2)]


def gpu_config_problems(doc: dict) -> list[str]:
    """Schema errors of a GpuConfig, plus what the schema cannot say: pinned limits of at least 1 MiB."""
    problems = [e.message for e in jsonschema.Draft202012Validator(GPU_CONFIG).iter_errors(doc)]
    mps = ((doc.get("sharing") or {}).get("mpsConfig") or {}) if isinstance(doc, dict) else {}
    limits = [mps.get("defaultPinnedDeviceMemoryLimit"), *(mps.get("defaultPerDevicePinnedMemoryLimit") or {}).values()]
    for q in limits:
        if isinstance(q, str) and re.fullmatch(QUANTITY, q) and quantity_bytes(q) < 2**20:
            problems.append(f"pinned memory limit {q} is below 1 MiB (the driver refuses it)")
    return problems
