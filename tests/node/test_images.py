"""Issue 27: the run's ``image`` is checked against the allow-list the site configures
(``SHAREBENCH_IMAGE_ALLOW`` prefixes) before the node step touches a node; a one-line refusal names
the image and the allowed prefixes."""

from __future__ import annotations

import pytest

from sharebench.components import steps
from sharebench.components.image import IMAGE
from sharebench.errors import UserError
from sharebench.node.images import IMAGE_ALLOW_ENV, allowed_prefixes, check_image, image_allowed, repository
from support.k8s_sim import SIM_WAIT_S, SimCluster

NODE = "gpu-node-1"


@pytest.mark.parametrize(
    "image, repo",
    [
        ("ghcr.io/sharebench/sharebench:0.1.0", "ghcr.io/sharebench/sharebench"),
        ("reg:5000/a/b:1.0", "reg:5000/a/b"),
        ("reg:5000/a/b", "reg:5000/a/b"),
        ("a/b@sha256:abc", "a/b"),
    ],
)
def test_repository(image, repo):
    assert repository(image) == repo


@pytest.mark.parametrize(
    "image, allowed",
    [
        ("ghcr.io/sharebench/sharebench:1.0", True),
        ("ghcr.io/sharebench:1.0", True),
        ("ghcr.io/sharebench@sha256:" + "0" * 64, True),
        ("ghcr.io/sharebench", True),
        ("ghcr.io/sharebench-evil/x:1", False),  # not at a boundary
        ("evil.io/ghcr.io/sharebench:1", False),
        ("registry.site/team/", False),
        ("registry.site/team/bench:2", True),
    ],
)
def test_prefixes_match_at_a_boundary(image, allowed):
    assert image_allowed(image, ("ghcr.io/sharebench", "registry.site/team/bench")) is allowed


@pytest.mark.parametrize(
    "image",
    [
        "ghcr.io/sharebench/../evil:1",  # issue 46: '..' passed the prefix
        "ghcr.io/sharebench/x;id",
        "ghcr.io/sharebench/x:1 --privileged",
        "ghcr.io/sharebench/x:1\n",
        "ghcr.io/sharebench/X:1",  # a path component is lowercase
        "ghcr.io/sharebench//x",
        "ghcr.io/sharebench/x@sha256:0",  # a digest of at least 32 hex digits
        "ghcr.io/sharebench/x:" + "t" * 129,  # a tag of at most 128
    ],
)
def test_a_reference_outside_the_oci_grammar_is_refused_before_any_prefix(image):
    """Issue 46: image references follow the OCI distribution grammar (docker-image-py's port of
    distribution/reference), checked before the allow-list, refused in one line."""
    assert not image_allowed(image, ("ghcr.io/sharebench",))
    with pytest.raises(UserError) as exc:
        check_image(image, "ghcr.io/sharebench", IMAGE)
    assert str(exc.value).startswith(f"image {image!r} is not an image reference (") and "\n" not in str(exc.value)
    assert str(exc.value).endswith("allowed: [REGISTRY[:PORT]/]PATH[:TAG][@DIGEST], lowercase path components "
                                   "joined by '/', e.g. ghcr.io/sharebench/sharebench:1.0")  # fmt: skip


def test_default_is_the_compiled_images_repository():
    assert allowed_prefixes(None, "ghcr.io/sharebench/sharebench:0.1.0") == ("ghcr.io/sharebench/sharebench",)
    assert allowed_prefixes(" , ", "a/b:1") == ("a/b",)
    assert allowed_prefixes("x.io/a/, y.io/b", "a/b:1") == ("x.io/a/", "y.io/b")
    assert check_image("ghcr.io/sharebench/sharebench:dev", None, "ghcr.io/sharebench/sharebench:0.1.0")


def test_refusal_names_the_image_and_the_prefixes():
    with pytest.raises(UserError) as exc:
        check_image("evil.io/x:1", "x.io/a/, y.io/b", IMAGE)
    assert str(exc.value) == (
        f"image 'evil.io/x:1' is not allowed here; allowed prefixes ({IMAGE_ALLOW_ENV}): x.io/a/, y.io/b"
    )
    with pytest.raises(UserError, match=r"allowed prefixes \(default; set SHAREBENCH_IMAGE_ALLOW to change\): "):
        check_image("evil.io/x:1", None, IMAGE)
    with pytest.raises(UserError, match="image '' is not allowed"):
        check_image("", None, IMAGE)


def test_node_step_refuses_before_it_touches_the_node(tmp_path, monkeypatch):
    with SimCluster(tmp_path) as sim:
        sim.add_gpu_node(NODE, "H200", gpus=2)
        monkeypatch.setenv("KUBECONFIG", str(sim.kubeconfig))
        monkeypatch.setenv(IMAGE_ALLOW_ENV, "registry.site/team/")
        before = len(sim.requests)
        with pytest.raises(UserError, match=r"image 'evil.io/x:1' is not allowed here; allowed prefixes \("):
            steps.reconfigure(
                node_name=NODE,
                mode="timeslice:2",
                gpu_model="",
                placement="pods",
                image="evil.io/x:1",
                timeout_s=SIM_WAIT_S,
                node_access="direct",  # agent mode: the agent checks the image (tests/node/test_agent.py)
            )
        assert len(sim.requests) == before  # not one request: the node was never looked at
        res = steps.reconfigure(
            node_name=NODE,
            mode="timeslice:2",
            gpu_model="",
            placement="pods",
            image="registry.site/team/bench:2",
            timeout_s=SIM_WAIT_S,
            run_id="run-a",
            node_access="direct",
        )
        assert res["resource"] == "nvidia.com/gpu"


def test_submit_checks_the_image_in_its_environment(monkeypatch):
    """``sharebench submit`` refuses a run image outside SHAREBENCH_IMAGE_ALLOW before the run exists."""
    cli = pytest.importorskip("sharebench.pipelines.cli")
    yaml = pytest.importorskip("yaml")
    from support.paths import ROOT

    spec = next(yaml.safe_load_all((ROOT / "pipelines/sharebench_sweep.yaml").read_text()))
    params = spec["root"]["inputDefinitions"]["parameters"]
    cli.check_arguments(params, {})  # the compiled default image: allowed by default
    with pytest.raises(UserError) as exc:
        cli.check_arguments(params, {"image": "evil.io/x:1"})
    assert str(exc.value) == (
        "--param: image 'evil.io/x:1' is not allowed here; allowed prefixes "
        f"(default; set {IMAGE_ALLOW_ENV} to change): {repository(IMAGE)}"
    )
    monkeypatch.setenv(IMAGE_ALLOW_ENV, "evil.io/")
    cli.check_arguments(params, {"image": "evil.io/x:1"})  # the site allows it
    with pytest.raises(UserError, match=f"allowed prefixes \\({IMAGE_ALLOW_ENV}\\): evil.io/"):
        cli.check_arguments(params, {})
