"""The training workload's ResNet-18 is torchvision's: the same parameter count, and (where torchvision
loads) the same state-dict keys and shapes. Skipped where torch is absent (``make install-ml``)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="the ml extra is not installed (make install-ml)")

from sharebench.workloads.resnet import resnet18  # noqa: E402


def test_parameter_count_is_resnet18s():
    model = resnet18(torch, num_classes=1000)
    assert sum(p.numel() for p in model.parameters()) == 11_689_512  # torchvision's resnet18, 1000 classes
    out = model.eval()(torch.zeros(2, 3, 64, 64))
    assert tuple(out.shape) == (2, 1000)


def test_state_dict_matches_torchvision():
    try:
        from torchvision import models
    except Exception as exc:  # noqa: BLE001 - absent, or built for another torch (its operators fail to load)
        pytest.skip(f"torchvision not usable here: {exc}")
    ours = {k: tuple(v.shape) for k, v in resnet18(torch).state_dict().items()}
    theirs = {k: tuple(v.shape) for k, v in models.resnet18(num_classes=1000).state_dict().items()}
    assert ours == theirs
