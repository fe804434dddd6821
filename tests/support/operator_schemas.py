"""Test support: JSON schemas for the gpu-operator configs sharebench writes, from their documented formats.

* device-plugin config: k8s-device-plugin ``api/config/v1`` (``version: v1``, ``flags``,
  ``sharing.timeSlicing`` / ``sharing.mps`` with ``renameByDefault``,
  ``failRequestsGreaterThanOne`` and ``resources: [{name, rename, devices, replicas}]``;
  ``replicas`` must be > 0, ``devices`` is ``all``, a count or a list of indices/UUIDs).
* mig-parted config: NVIDIA mig-parted ``api/spec/v1`` (``version: v1``, ``mig-configs``:
  name → list of ``{device-filter, devices, mig-enabled, mig-devices}``).
* gpu-operator Helm values: the subset sharebench sets (``mig.strategy``,
  ``devicePlugin.config``, ``migManager.config``/``env``, ``gfd.enabled``); other chart
  values are allowed and not checked.

Beyond the schemas, :func:`mig_parted_problems` checks what a schema cannot: instance
counts against the GPU tables in ``sharebench.gpus`` for the models a device filter names.
"""

from __future__ import annotations

import jsonschema

from sharebench.errors import UserError
from sharebench.gpus import GPU_MODELS
from sharebench.manifests.operator import PCI_DEVICE_IDS

_RESOURCE = r"^nvidia\.com/(gpu|mig-[0-9]+g\.[0-9]+gb)$"
_PCI_ID = r"^0x[0-9A-Fa-f]{8}$"
_PROFILE = r"^[0-9]+g\.[0-9]+gb(\+[a-z.]+)?$"

_REPLICATED = {
    "type": "object",
    "additionalProperties": False,
    "required": ["resources"],
    "properties": {
        "renameByDefault": {"type": "boolean"},
        "failRequestsGreaterThanOne": {"type": "boolean"},
        "resources": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["name", "replicas"],
                "properties": {
                    "name": {"type": "string", "pattern": _RESOURCE},
                    "rename": {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?(/[-a-zA-Z0-9._]+)?$"},
                    "devices": {
                        "oneOf": [
                            {"const": "all"},
                            {"type": "integer", "minimum": 1},
                            {
                                "type": "array",
                                "minItems": 1,
                                "items": {
                                    "oneOf": [{"type": "integer", "minimum": 0}, {"type": "string", "minLength": 1}]
                                },
                            },
                        ]
                    },
                    "replicas": {"type": "integer", "minimum": 1},
                },
            },
        },
    },
}

DEVICE_PLUGIN_CONFIG = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "NVIDIA k8s-device-plugin config, version v1",
    "type": "object",
    "required": ["version"],
    "additionalProperties": False,
    "properties": {
        "version": {"const": "v1"},
        "flags": {
            "type": "object",
            "properties": {
                "migStrategy": {"enum": ["none", "single", "mixed"]},
                "failOnInitError": {"type": "boolean"},
                "nvidiaDriverRoot": {"type": "string"},
                "plugin": {"type": "object"},
                "gfd": {"type": "object"},
            },
        },
        "resources": {"type": "object"},
        "sharing": {
            "type": "object",
            "additionalProperties": False,
            "maxProperties": 1,  # one sharing strategy at a time
            "properties": {"timeSlicing": _REPLICATED, "mps": _REPLICATED},
        },
    },
}

_MIG_ITEM = {
    "type": "object",
    "additionalProperties": False,
    "required": ["devices", "mig-enabled"],
    "properties": {
        "device-filter": {
            "oneOf": [
                {"type": "string", "pattern": _PCI_ID},
                {"type": "array", "minItems": 1, "items": {"type": "string", "pattern": _PCI_ID}},
            ]
        },
        "devices": {
            "oneOf": [
                {"const": "all"},
                {"type": "array", "minItems": 1, "items": {"type": "integer", "minimum": 0}},
            ]
        },
        "mig-enabled": {"type": "boolean"},
        "mig-devices": {
            "type": "object",
            "propertyNames": {"pattern": _PROFILE},
            "additionalProperties": {"type": "integer", "minimum": 1},
        },
    },
    # mig-devices only where MIG is enabled
    "if": {"properties": {"mig-enabled": {"const": False}}},
    "then": {"not": {"required": ["mig-devices"]}},
    "else": {"required": ["mig-devices"]},
}

MIG_PARTED_CONFIG = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "NVIDIA mig-parted config, version v1",
    "type": "object",
    "required": ["version", "mig-configs"],
    "additionalProperties": False,
    "properties": {
        "version": {"const": "v1"},
        "mig-configs": {
            "type": "object",
            "minProperties": 1,
            "propertyNames": {"pattern": r"^[A-Za-z0-9][-A-Za-z0-9._]*$"},
            "additionalProperties": {"type": "array", "minItems": 1, "items": _MIG_ITEM},
        },
    },
}

_CONFIG_REF = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "create": {"type": "boolean"},
        "name": {"type": "string"},
        "default": {"type": "string"},
        "data": {"type": ["object", "string"]},
    },
}

HELM_VALUES = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "gpu-operator Helm values: the subset sharebench sets",
    "type": "object",
    "required": ["mig", "migManager"],  # the config names are the site's (issue 14): optional
    "properties": {
        "mig": {
            "type": "object",
            "required": ["strategy"],
            "additionalProperties": False,
            "properties": {"strategy": {"enum": ["single", "mixed"]}},
        },
        "devicePlugin": {
            "type": "object",
            "properties": {"enabled": {"type": "boolean"}, "config": {**_CONFIG_REF, "required": ["name", "default"]}},
        },
        "migManager": {
            "type": "object",
            "properties": {
                "enabled": {"type": "boolean"},
                "config": {**_CONFIG_REF, "required": ["name", "default"]},
                "env": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["name", "value"],
                        "additionalProperties": False,
                        "properties": {"name": {"type": "string"}, "value": {"type": "string"}},
                    },
                },
            },
        },
        "gfd": {"type": "object", "properties": {"enabled": {"type": "boolean"}}},
    },
}

SCHEMAS = {
    "device-plugin config": DEVICE_PLUGIN_CONFIG,
    "mig-parted config": MIG_PARTED_CONFIG,
    "gpu-operator Helm values": HELM_VALUES,
}


def validate(kind: str, obj: object, where: str = "") -> None:
    """Raise UserError (one line: what, where, the first problem) unless ``obj`` fits the schema."""
    schema = SCHEMAS.get(kind)
    if schema is None:
        raise UserError(f"no schema for {kind!r}; known: {', '.join(SCHEMAS)}")
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(obj), key=lambda e: list(e.absolute_path))
    if errors:
        e = errors[0]
        path = ".".join(str(p) for p in e.absolute_path) or "(top)"
        at = f" {where}" if where else ""
        raise UserError(f"invalid {kind}{at}: {path}: {e.message}")


def mig_parted_problems(config: dict) -> list[str]:
    """What the schema cannot check: per model, instance counts and slices fit the GPU."""
    by_id = {pci.upper(): GPU_MODELS[key] for key, ids in PCI_DEVICE_IDS.items() for pci in ids}
    problems = []
    for name, items in config.get("mig-configs", {}).items():
        for i, item in enumerate(items):
            if not item.get("mig-enabled"):
                continue
            filt = item.get("device-filter")
            ids = [filt] if isinstance(filt, str) else list(filt or [])
            for pci in ids:
                model = by_id.get(pci.upper())
                if model is None:
                    continue
                slices = 0
                for prof, count in item.get("mig-devices", {}).items():
                    known = {p.name: p for p in model.profiles}
                    if prof not in known:
                        problems.append(f"{name}[{i}]: profile {prof} does not exist on {model.key}")
                        continue
                    if count > known[prof].max_count:
                        problems.append(f"{name}[{i}]: {count} x {prof} > {known[prof].max_count} on {model.key}")
                    slices += known[prof].slices * count
                if slices > 7:
                    problems.append(f"{name}[{i}]: {slices} compute slices > 7 on {model.key}")
    return problems
