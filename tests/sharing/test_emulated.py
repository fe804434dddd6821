"""mig-emulated:LAYOUT and mps:N@PCT plans: one MPS client per instance with its profile's SM share and
memory limit; the SMs an MPS thread share gives (measured on the H200, issue 15)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from sharebench import gpus
from sharebench.errors import UserError
from sharebench.modes import parse_mode
from sharebench.sharing import layout as plan_mod

H200 = {
    "spec": "cuda:0",
    "kind": "gpu",
    "backend": "cuda",
    "name": "NVIDIA H200",
    "uuid": "GPU-836c",
    "memory_bytes": 141 * 10**9,
    "platform": "CUDA",
}
ROUNDING = Path(__file__).resolve().parents[1] / "data" / "results" / "h200" / "partitions" / "mps_sm_rounding.csv"


@pytest.fixture
def mps_here(monkeypatch):
    """The plan checks that nvidia-cuda-mps-control exists; CI has none, the planning is what is tested."""
    monkeypatch.setattr(plan_mod, "check_mps_available", lambda *a, **k: "/usr/bin/nvidia-cuda-mps-control")


def test_mps_sms_is_what_the_h200_gave():
    measured = list(csv.DictReader(ROUNDING.open()))
    assert len(measured) >= 10
    for r in measured:
        assert gpus.mps_sms("H200", int(r["pct"])) == int(r["used_sms"]), r


def test_every_profile_gets_its_sms_back():
    for model in gpus.GPU_MODELS.values():
        for p in model.profiles:
            assert gpus.mps_sms(model, gpus.mps_pct_for_sms(model, p.sms)) == p.sms, (model.key, p.name)


@pytest.mark.parametrize(
    "layout, profiles",
    [
        ("4g.71gb+3g.71gb", [("4g.71gb", "49", "0=71000M", 64), ("3g.71gb", "46", "0=71000M", 60)]),
        ("3x2g.35gb", [("2g.35gb", "25", "0=35000M", 32)] * 3),
        ("7g", [("7g.141gb", "100", "0=141000M", 132)]),
        ("1g", [("1g.18gb", "13", "0=18000M", 16)] * 7),
    ],
)
def test_emulated_layout_plan(mps_here, layout, profiles):
    cp = plan_mod.plan_cell(f"mig-emulated:{layout}", H200)
    assert cp.mps and cp.mode.label == f"mig-emulated:{layout}" and cp.n == len(profiles)
    got = [
        (r.mig_profile, r.env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"], r.env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"], r.sms)
        for r in cp.replicas
    ]
    assert got == profiles
    assert all(r.parent_uuid == "GPU-836c" and r.device == "cuda:0" for r in cp.replicas)


def test_mps_thread_share_records_its_sms(mps_here):
    assert [r.sms for r in plan_mod.plan_cell("mps:2@25", H200).replicas] == [32, 32]
    assert [r.sms for r in plan_mod.plan_cell("mps:2", H200).replicas] == [132, 132]


@pytest.mark.parametrize(
    "mode, message",
    [
        ("mig-emulated:8x1g.18gb", "emulated MIG layout '8x1g.18gb': 8 x 1g.18gb on H200, which holds at most 7"),
        (
            "mig-emulated:4g.71gb+4g.71gb",
            "emulated MIG layout '4g.71gb+4g.71gb': 2 x 4g.71gb on H200, which holds at most 1",
        ),
        (
            "mig-emulated:7g.141gb+1g.18gb",
            "emulated MIG layout '7g.141gb+1g.18gb' needs 8 compute slices; a H200 has 7",
        ),
        (
            "mig-emulated:1g.5gb",
            "MIG profile '1g.5gb' does not exist on H200; allowed: 1g.18gb, 1g.35gb, 2g.35gb, "
            "3g.71gb, 4g.71gb, 7g.141gb",
        ),
        ("mig-emulated:0x1g.18gb", "bad emulated MIG layout '0x1g.18gb'; allowed: " + gpus.EMULATED_LAYOUT_HELP),
    ],
)
def test_bad_emulated_layouts_in_one_line(mps_here, mode, message):
    with pytest.raises(UserError) as e:
        plan_mod.plan_cell(mode, H200)
    assert str(e.value) == message


def test_emulation_needs_cuda_and_a_known_gpu(mps_here):
    with pytest.raises(UserError, match="needs an NVIDIA GPU through CUDA"):
        plan_mod.plan_cell("mig-emulated:1g", dict(H200, spec="opencl:0.0", backend="opencl"))
    with pytest.raises(UserError, match="has no MIG profile table"):
        plan_mod.plan_cell("mig-emulated:1g", dict(H200, name="NVIDIA GeForce RTX 4090"))


def test_mode_grammar():
    assert parse_mode("MIG-emulated:7x1g.18gb").label == "mig-emulated:7x1g.18gb"
    with pytest.raises(UserError, match="bad emulated MIG layout in 'mig-emulated:1g 18'"):
        parse_mode("mig-emulated:1g 18")
