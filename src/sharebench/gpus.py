"""GPU models and their MIG profiles: the one table every part uses.

SM counts and memory per profile are what ``nvidia-smi mig -lgip`` reports
(H200 read on the lent machine, 2026-12-02; the others from NVIDIA's MIG user
guide). Node reconfiguration validates layouts with it, the analysis computes
ideal partition scaling from it, and the prediction computes the compute share
a MIG profile loses.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from sharebench.errors import UserError


@dataclass(frozen=True)
class MigProfile:
    name: str  # e.g. "1g.5gb"
    slices: int  # compute slices (the "Ng")
    sms: int  # streaming multiprocessors in one instance
    mem_gb: float  # memory of one instance, as in the profile name
    max_count: int  # instances of this profile one GPU can hold


@dataclass(frozen=True)
class GpuModel:
    key: str  # canonical name used in options: "A100-40GB"
    sms: int  # SMs of the whole GPU, MIG disabled
    mem_gb: float
    profiles: tuple[MigProfile, ...]
    products: tuple[str, ...]  # substrings of nvidia.com/gpu.product / NVML names

    def profile(self, name: str) -> MigProfile:
        for p in self.profiles:
            if p.name == name:
                return p
        allowed = ", ".join(p.name for p in self.profiles)
        raise UserError(f"MIG profile {name!r} does not exist on {self.key}; allowed: {allowed}")


def _profiles(*rows: tuple[str, int, int, float, int]) -> tuple[MigProfile, ...]:
    return tuple(MigProfile(*r) for r in rows)


GPU_MODELS: dict[str, GpuModel] = {
    m.key: m
    for m in [
        GpuModel(
            "A100-40GB",
            108,
            40,
            _profiles(
                ("1g.5gb", 1, 14, 5, 7),
                ("1g.10gb", 1, 14, 10, 4),
                ("2g.10gb", 2, 28, 10, 3),
                ("3g.20gb", 3, 42, 20, 2),
                ("4g.20gb", 4, 56, 20, 1),
                ("7g.40gb", 7, 98, 40, 1),
            ),
            ("A100-SXM4-40GB", "A100-PCIE-40GB", "A100-40GB"),
        ),
        GpuModel(
            "A100-80GB",
            108,
            80,
            _profiles(
                ("1g.10gb", 1, 14, 10, 7),
                ("1g.20gb", 1, 14, 20, 4),
                ("2g.20gb", 2, 28, 20, 3),
                ("3g.40gb", 3, 42, 40, 2),
                ("4g.40gb", 4, 56, 40, 1),
                ("7g.80gb", 7, 98, 80, 1),
            ),
            ("A100-SXM4-80GB", "A100-80GB-PCIe", "A100-80GB"),
        ),
        GpuModel(
            "H100-80GB",
            132,
            80,
            _profiles(
                ("1g.10gb", 1, 16, 10, 7),
                ("1g.20gb", 1, 26, 20, 4),
                ("2g.20gb", 2, 32, 20, 3),
                ("3g.40gb", 3, 60, 40, 2),
                ("4g.40gb", 4, 64, 40, 1),
                ("7g.80gb", 7, 132, 80, 1),
            ),
            ("H100-80GB-HBM3", "H100-SXM5-80GB", "H100-80GB"),
        ),
        GpuModel(
            "H100-NVL",
            132,
            94,
            _profiles(
                ("1g.12gb", 1, 16, 12, 7),
                ("1g.24gb", 1, 26, 24, 4),
                ("2g.24gb", 2, 32, 24, 3),
                ("3g.47gb", 3, 60, 47, 2),
                ("4g.47gb", 4, 64, 47, 1),
                ("7g.94gb", 7, 132, 94, 1),
            ),
            ("H100-NVL", "H100 NVL"),
        ),
        GpuModel(
            "H200",
            132,
            141,
            _profiles(
                ("1g.18gb", 1, 16, 18, 7),
                ("1g.35gb", 1, 26, 35, 4),
                ("2g.35gb", 2, 32, 35, 3),
                ("3g.71gb", 3, 60, 71, 2),
                ("4g.71gb", 4, 64, 71, 1),
                ("7g.141gb", 7, 132, 141, 1),
            ),
            ("H200",),
        ),
    ]
}


# what a GPU model's name may hold: a key, a product label value or the driver's name ("NVIDIA H200")
GPU_MODEL_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9 ._-]{0,61}[A-Za-z0-9])?")


def gpu_model(name: str) -> GpuModel:
    """A model by its key ("A100-40GB") or by a product string ("NVIDIA-A100-SXM4-40GB",
    "NVIDIA H200", "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"). A name outside the grammar of those
    (:data:`GPU_MODEL_NAME`: letters, digits, ' ', '.', '_', '-', at most 63) is refused in one line."""
    if name in GPU_MODELS:
        return GPU_MODELS[name]
    if not isinstance(name, str) or not GPU_MODEL_NAME.fullmatch(name.strip()):
        raise UserError(
            f"GPU model {name!r} is not a GPU model name; allowed: at most 63 letters, digits, ' ', '.', '_' "
            f"and '-' (a key: {', '.join(GPU_MODELS)}; or a product label such as NVIDIA-H200)"
        )
    norm = re.sub(r"[\s_]+", "-", name.strip()).upper()
    norm = re.sub(r"-MIG-.*$", "", norm)
    for key, model in GPU_MODELS.items():
        if norm == key.upper():
            return model
    # longest product substring wins (so "H100-NVL" is not taken for "H100-80GB")
    best = None
    for model in GPU_MODELS.values():
        for prod in model.products:
            p = re.sub(r"[\s_]+", "-", prod).upper()
            if p in norm and (best is None or len(p) > best[0]):
                best = (len(p), model)
    if best:
        return best[1]
    raise UserError(f"unknown GPU model {name!r}; known: {', '.join(GPU_MODELS)}")


def resolve_layout(model: GpuModel | str, layout: str) -> str:
    """Turn a short layout into the mig-parted config name for this model.

    ``7g`` → ``all-7g.40gb`` on an A100-40GB, ``all-7g.141gb`` on an H200;
    ``1g`` → the smallest-memory 1g profile (``all-1g.5gb``, ``all-1g.18gb``);
    ``1g.10gb`` → ``all-1g.10gb``; ``all-…`` is checked and returned;
    ``disabled``/``all-disabled`` → ``all-disabled``.
    """
    m = gpu_model(model) if isinstance(model, str) else model
    s = layout.strip().lower()
    if s in ("disabled", "all-disabled"):
        return "all-disabled"
    if s.startswith("all-"):
        s = s[4:]
    if re.fullmatch(r"\d+g", s):
        cands = [p for p in m.profiles if p.name.startswith(s + ".")]
        if not cands:
            allowed = ", ".join(sorted({p.name.split(".")[0] for p in m.profiles}))
            raise UserError(f"MIG layout {layout!r} has no profile on {m.key}; allowed sizes: {allowed}")
        return "all-" + min(cands, key=lambda p: p.mem_gb).name
    m.profile(s)  # raises with the allowed list
    return "all-" + s


def layout_profiles(model: GpuModel | str, layout: str) -> list[MigProfile]:
    """The instances one GPU holds under a resolved ``all-<profile>`` layout."""
    m = gpu_model(model) if isinstance(model, str) else model
    name = resolve_layout(m, layout)
    if name == "all-disabled":
        return []
    p = m.profile(name[4:])
    return [p] * p.max_count


def models_with_profile(profile: str) -> list[GpuModel]:
    """The models that have a MIG profile of this name (``1g.18gb`` exists on the H200 only)."""
    return [m for m in GPU_MODELS.values() if any(p.name == profile for p in m.profiles)]


def profile_name(model_key: str | None, sms: int | None, memory_bytes: int | None) -> str | None:
    """The profile (``1g.18gb``) of a MIG instance of a model from its SMs and memory, or None."""
    if not model_key or not sms:
        return None
    model = GPU_MODELS.get(model_key)
    if model is None:
        return None
    cands = [p for p in model.profiles if p.sms == sms]
    if len(cands) > 1 and memory_bytes:
        gb = memory_bytes / 1e9
        cands = [min(cands, key=lambda p: abs(p.mem_gb - gb))]
    return cands[0].name if len(cands) == 1 else None


# ------------------------------------------------------------------ MPS thread shares

TPC_SMS = 2  # SMs per texture processing cluster: the unit MPS hands SMs out in (Volta and later)
MPS_MIN_SMS = 8  # the fewest SMs a client got: 5% of an H200 (6.6 SMs) ran on 8 (measured, below)


def mps_sms(model: GpuModel | str, pct: int | float) -> int:
    """The SMs an MPS client limited to ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=pct`` gets on this model.

    pct % of the GPU's SMs, floored to whole TPCs (2 SMs), and at least :data:`MPS_MIN_SMS`.
    Measured on an H200 (driver 580.159.04, 2026-12-03) by tools/mps_sm_rounding.py, which
    reads the SM id (``%smid``) of every block a client runs: 10, 12, 13, 14, 20, 25, 33, 46, 49,
    50, 75 and 100% gave 12, 14, 16, 18, 26, 32, 42, 60, 64, 66, 98 and 132 SMs, this rule's
    numbers; 5% gave 8 (the floor would give 6), hence the minimum. Other GPUs: inferred.
    """
    m = gpu_model(model) if isinstance(model, str) else model
    return share_sms(m.sms, pct)


def share_sms(full_sms: int, pct: int | float) -> int:
    """:func:`mps_sms` for a GPU of ``full_sms`` SMs: pct % floored to whole TPCs, at least one."""
    if not 0 < float(pct) <= 100:
        raise UserError(f"MPS thread percentage {pct!r} is out of range; allowed: 1..100")
    if float(pct) >= 100:
        return int(full_sms)
    sms = int(math.floor(full_sms * float(pct) / 100 / TPC_SMS)) * TPC_SMS
    return min(max(MPS_MIN_SMS, sms), int(full_sms))


def mps_pct_for_sms(model: GpuModel | str, sms: int) -> int:
    """The smallest thread percentage that gives an MPS client ``sms`` SMs (by :func:`mps_sms`)."""
    m = gpu_model(model) if isinstance(model, str) else model
    for pct in range(max(1, math.floor(100 * sms / m.sms)), 101):
        if mps_sms(m, pct) >= sms:
            return pct
    return 100


# ------------------------------------------------------------------ emulated MIG layouts

EMULATED_LAYOUT_HELP = (
    "a profile (1g.18gb: one instance), COUNTxPROFILE (7x1g.18gb), PROFILE+PROFILE "
    "(4g.71gb+3g.71gb), or all-PROFILE (as many as the GPU holds)"
)


def emulated_layout(model: GpuModel | str, layout: str) -> list[MigProfile]:
    """The instances of a ``mig-emulated:LAYOUT`` on this model, one MPS client each.

    LAYOUT: ``1g.18gb`` (one instance), ``7x1g.18gb``, ``4g.71gb+3g.71gb``, ``all-1g.18gb`` /
    ``7g`` / ``1g`` (as ``mig:`` resolves them: as many as the GPU holds). A layout that a real
    GPU could not hold (more instances than the profile allows, more than 7 compute slices) is
    refused in one line, so that the emulation stays a layout MIG could run.
    """
    m = gpu_model(model) if isinstance(model, str) else model
    s = layout.strip().lower()
    if s.startswith("all-") or re.fullmatch(r"\d+g", s):
        return layout_profiles(m, s)
    out: list[MigProfile] = []
    for part in s.split("+"):
        count_s, x, name = part.partition("x")
        if not x:
            count_s, name = "1", part
        if not count_s.isdigit() or int(count_s) < 1:
            raise UserError(f"bad emulated MIG layout {layout!r}; allowed: {EMULATED_LAYOUT_HELP}")
        p = m.profile(name)
        out += [p] * int(count_s)
    for p in {q.name: q for q in out}.values():
        n = sum(q.name == p.name for q in out)
        if n > p.max_count:
            raise UserError(
                f"emulated MIG layout {layout!r}: {n} x {p.name} on {m.key}, which holds at most {p.max_count}"
            )
    if sum(p.slices for p in out) > 7:
        raise UserError(
            f"emulated MIG layout {layout!r} needs {sum(p.slices for p in out)} compute slices; a {m.key} has 7"
        )
    return out
