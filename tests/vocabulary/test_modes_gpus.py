import pytest

from sharebench.errors import UserError
from sharebench.gpus import GPU_MODELS, gpu_model, layout_profiles, resolve_layout
from sharebench.modes import Mode, parse_mode, parse_modes


@pytest.mark.parametrize(
    "text, mode",
    [
        ("exclusive", Mode("exclusive", 1)),
        ("timeslice:4", Mode("timeslice", 4)),
        ("MPS:2", Mode("mps", 2)),
        ("mps:4@25", Mode("mps", 4, thread_pct=25)),
        ("mig:7g", Mode("mig", None, layout="7g")),
        ("partition:2", Mode("partition", 2)),
    ],
)
def test_parse_mode(text, mode):
    assert parse_mode(text) == mode
    assert parse_mode(mode.label) == mode


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("slicing:2", "unknown sharing mode 'slicing:2'"),
        ("timeslice:0", "must be >= 1"),
        ("timeslice:x", "bad replica count"),
        ("mps:2@150", "1..100"),
        ("mig:huge", "bad MIG layout"),
        ("exclusive:2", "takes no count"),
    ],
)
def test_parse_mode_errors_are_one_line(text, fragment):
    with pytest.raises(UserError) as err:
        parse_mode(text)
    assert fragment in str(err.value)
    assert "\n" not in str(err.value)


def test_parse_modes_list():
    assert [m.label for m in parse_modes("exclusive, timeslice:2,mps:2")] == ["exclusive", "timeslice:2", "mps:2"]
    with pytest.raises(UserError):
        parse_modes(" , ")


@pytest.mark.parametrize(
    "product, key",
    [
        ("NVIDIA-A100-SXM4-40GB", "A100-40GB"),
        ("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", "A100-40GB"),
        ("NVIDIA A100-SXM4-80GB", "A100-80GB"),
        ("NVIDIA-H100-80GB-HBM3", "H100-80GB"),
        ("NVIDIA H100 NVL", "H100-NVL"),
        ("NVIDIA H200", "H200"),
        ("h200", "H200"),
    ],
)
def test_gpu_model_from_product(product, key):
    assert gpu_model(product).key == key


@pytest.mark.parametrize(
    "model, short, full",
    [
        ("A100-40GB", "7g", "all-7g.40gb"),
        ("A100-40GB", "1g", "all-1g.5gb"),
        ("H200", "7g", "all-7g.141gb"),
        ("H200", "1g", "all-1g.18gb"),
        ("H200", "all-3g.71gb", "all-3g.71gb"),
        ("H100-80GB", "disabled", "all-disabled"),
    ],
)
def test_resolve_layout(model, short, full):
    assert resolve_layout(model, short) == full


def test_profile_tables_match_the_study_and_the_h200():
    a100 = GPU_MODELS["A100-40GB"]
    assert a100.sms == 108 and a100.profile("7g.40gb").sms == 98 and a100.profile("1g.5gb").sms == 14
    h200 = GPU_MODELS["H200"]
    assert [(p.name, p.sms, p.max_count) for p in h200.profiles] == [
        ("1g.18gb", 16, 7),
        ("1g.35gb", 26, 4),
        ("2g.35gb", 32, 3),
        ("3g.71gb", 60, 2),
        ("4g.71gb", 64, 1),
        ("7g.141gb", 132, 1),
    ]
    assert len(layout_profiles("A100-40GB", "1g")) == 7
    with pytest.raises(UserError, match="allowed"):
        resolve_layout("A100-40GB", "1g.18gb")
    with pytest.raises(UserError, match="unknown GPU model 'T4'"):
        gpu_model("T4")
