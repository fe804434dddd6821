"""The project image, run: the CLI in it, and the pipelines with every task in a container.

The image is the project's Dockerfile built by ``.ci/image`` (podman, on a Debian bookworm base made
locally: no CUDA base can be pulled on CI's machines). The pipelines run through kfp.local's
DockerRunner talking to podman's Docker-compatible API (``podman system service``), with no network,
as uid 1000 (the image's user). Skipped, with the reason, only where podman is absent; where podman is
present and the image is not, the fixture builds it (a failed build fails the tests).

Two things on the test side, both of kfp.local and not of the project:
- kubeflow/pipelines#13332: kfp.local runs each container with auto_remove=True and takes a NotFound
  when it asks for the exit code as success (podman answers 500 for a removed container): a failed
  component would be reported SUCCESS. ``run_container`` below keeps the container until its exit
  code is read, then removes it.
- kfp.local passes a task's image through unresolved when it comes from the ``image`` pipeline
  parameter (``{{$.inputs.parameters[...]}}``): ``run_container`` maps it, and the image components
  name by default, to the image built here.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from sharebench.components.image import IMAGE as COMPONENT_IMAGE
from support.paths import ROOT

# the image's tests run in CI's second step (make test-long)
pytestmark = [pytest.mark.container, pytest.mark.slow, pytest.mark.long]

PODMAN = shutil.which("podman")
IMAGE = os.environ.get("SHAREBENCH_TEST_IMAGE", "localhost/sharebench:ci")
UID = "1000:1000"


def podman(*args: str, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([PODMAN, *args], capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)}: exit {proc.returncode}\n{proc.stderr[-3000:]}")
    return proc


@pytest.fixture(scope="session")
def image() -> str:
    """The project image (built by .ci/image if it is not here yet)."""
    if PODMAN is None:
        pytest.skip("no podman here: the container tests need it (CI installs it: .ci/run)")
    conf = subprocess.run([str(ROOT / ".ci" / "image"), "--conf-only"], capture_output=True, text=True, check=True)
    os.environ["CONTAINERS_CONF"] = conf.stdout.strip()
    if podman("image", "exists", IMAGE, check=False).returncode != 0:
        build = subprocess.run(
            [str(ROOT / ".ci" / "image")],
            capture_output=True,
            text=True,
            timeout=3600,
            env={**os.environ, "SHAREBENCH_IMAGE": IMAGE},
        )
        assert build.returncode == 0, f".ci/image failed:\n{build.stderr[-5000:]}"
    return IMAGE


def in_image(image: str, *argv: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """argv in the image as its user, with no network, as a pod would run it."""
    return podman("run", "--rm", "--network", "none", "--user", UID, image, *argv, timeout=timeout)


@pytest.fixture(scope="session")
def container_opencl_spec(image) -> str:
    """The spec of the CPU OpenCL device (PoCL) inside the image."""
    devices = json.loads(in_image(image, "sharebench", "devices", "--json").stdout)["devices"]
    specs = [d["spec"] for d in devices if d["backend"] == "opencl" and d["kind"] == "cpu"]
    assert specs, f"no CPU OpenCL device in the image: {devices}"
    return specs[0]


@pytest.mark.parametrize("device", ["cpu", "opencl"])
def test_cli_tracks_in_the_image_with_the_kernel_cache_from_the_build(image, device):
    out = in_image(image, "sharebench", "track", "--device", device, "--particles", "64", "--turns", "1").stdout
    fields = dict(line.split(None, 1) for line in out.splitlines() if line.strip() and " " in line.strip())
    assert fields["context"].strip() == device
    assert fields["survived"].strip() == "64"
    assert "'kernel_cache_hit': True" in fields["extra"], out


def test_host_id_is_the_same_inside_and_outside_a_container(image):
    """Two replica containers on one CPU are one device (the boot id, not a hostname or machine-id)."""
    from sharebench.devices.host import host_id

    inside = in_image(image, "python3", "-c", "from sharebench.devices.host import host_id; print(host_id())")
    assert inside.stdout.strip() == host_id()


def test_the_image_plans_a_budget_from_the_recorded_h200_results(image):
    """A pipeline's budget on a node plans from recorded rates: the image holds the committed campaigns'
    tables and documents (SHAREBENCH_RECORDED: every results.csv), not their pictures or archives."""
    out = in_image(image, "sharebench", "run", "--dry-run", "--budget", "10m", "--gpu-model", "H200").stdout
    assert "planned from recorded rates of H200" in out and "under /opt/sharebench/results" in out, out
    listing = in_image(image, "find", "/opt/sharebench/results", "-type", "f").stdout.split()
    assert {Path(f).suffix for f in listing} == {".csv", ".json"}  # no pictures, reports or archives
    local = {str(p.relative_to(ROOT / "results")) for p in (ROOT / "results").rglob("results.csv")}
    assert {str(Path(f).relative_to("/opt/sharebench/results")) for f in listing if f.endswith("/results.csv")} == local


# --- the pipelines through kfp.local.DockerRunner and podman's Docker API -------------------------------


@pytest.fixture(scope="session")
def docker_api(image, tmp_path_factory):
    """podman's Docker-compatible API on a socket of its own; DOCKER_HOST names it."""
    pytest.importorskip("docker", reason="the docker SDK is in the test extra: pip install -e '.[test]'")
    sock = tmp_path_factory.mktemp("podman") / "docker.sock"
    service = subprocess.Popen(
        [PODMAN, "system", "service", "--time=0", f"unix://{sock}"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 60
    while not sock.exists():
        assert service.poll() is None, f"podman system service exited: {service.stderr.read().decode()[-2000:]}"
        assert time.monotonic() < deadline, "podman system service did not open its socket in 60 s"
        time.sleep(0.2)
    old = os.environ.get("DOCKER_HOST")
    os.environ["DOCKER_HOST"] = f"unix://{sock}"
    yield os.environ["DOCKER_HOST"]
    if old is None:
        os.environ.pop("DOCKER_HOST", None)
    else:
        os.environ["DOCKER_HOST"] = old
    service.terminate()
    service.wait(timeout=30)


RAN: dict[str, list[str]] = {}  # function -> the command its container ran (kfp.local's DockerRunner)


@pytest.fixture(scope="module")
def docker_local(docker_api, image, tmp_path_factory):
    """kfp.local set up for containers; returns the pipeline root (writable for the image's uid 1000)."""
    from kfp import local
    from kfp.local import docker_task_handler

    def run_container(client, image: str, command, volumes, **run_args) -> int:
        if image.startswith("{{") or image == COMPONENT_IMAGE:
            image = IMAGE
        run_args.pop("auto_remove", None)
        RAN[command[command.index("--function_to_execute") + 1]] = command[: command.index("--executor_input")]
        container = client.containers.run(image=image, command=command, detach=True, volumes=volumes, **run_args)
        try:
            for line in container.logs(stream=True, follow=True):
                print(line.decode(), end="")
            return container.wait()["StatusCode"]
        finally:
            container.remove(force=True)

    root = tmp_path_factory.mktemp("container") / "pipeline_root"
    root.mkdir()
    root.chmod(0o777)
    old_umask = os.umask(0)  # what kfp.local makes under the root, the container's uid 1000 writes into
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(docker_task_handler, "run_docker_container", run_container)
        local.init(runner=local.DockerRunner(network_mode="none"), pipeline_root=str(root))
        yield root
    os.umask(old_umask)


def container_lattice(root: Path) -> str:
    """The test lattice under the pipeline root: only the root is mounted in the containers."""
    from support.lattices import tiny_lattice

    return str(tiny_lattice(root / "fodo.json"))


@pytest.fixture(scope="module")
def docker_sweep(docker_local, container_opencl_spec) -> Path:
    """The sweep pipeline, every task in a container (2 modes, 1 size, no warm-up cell: 14 tasks)."""
    from sharebench.pipelines.sweep_pipeline import sweep_pipeline

    lattice = container_lattice(docker_local)
    sweep_pipeline(
        node_name="",
        gpu_model="",
        modes=["exclusive", "timeslice:2"],
        particle_counts=[300],
        repeats=1,
        warmup_repeats=0,
        turns=20,
        placement="processes",
        workload={"lattice": lattice, "device": container_opencl_spec},
        start_delay_s=2.0,
        image=IMAGE,
        history=str(docker_local / "history"),  # a folder under the root: the history step runs too
    )
    (run,) = docker_local.glob("sharebench-sweep-*")
    return run


def test_sweep_pipeline_runs_with_every_task_in_a_container(docker_sweep):
    from sharebench.results import load_results

    df = load_results(docker_sweep / "collect-results" / "results")
    assert sorted(df["cell_id"]) == ["exclusive_p300_r1", "timeslice:2_p300_r1", "timeslice:2_p300_r1"]
    assert set(df["status"]) == {"ok"} and set(df["cell_status"]) == {"ok"}
    assert set(df["backend"]) == {"opencl"} and set(df["device_class"]) == {"cpu"}
    assert (df["survived"] == 300).all() and (df["turns"] == 20).all()
    assert sorted(df.loc[df["mode"] == "timeslice:2", "replica"]) == [0, 1]
    html = (docker_sweep / "write-report" / "report_html").read_text()
    assert html.lstrip().lower().startswith("<!doctype html") and "timeslice:2" in html
    restored = json.loads((docker_sweep / "restore-node" / "executor_output.json").read_text())
    assert restored["parameterValues"]["Output"] == []
    from sharebench.history import open_store
    from sharebench.history.store import RUNS

    # the history step ran in the image and added this run (its rows: the cells the tables did not exclude,
    # which a loaded 2-core machine may leave at none)
    (added,) = open_store(str(docker_sweep.parent / "history")).names(RUNS)
    assert added.endswith(".csv") and "record_history" in RAN


def committed_executors() -> dict[str, dict]:
    """function -> container spec, of every executor of the committed pipeline YAML."""
    import yaml

    out = {}
    for name in ("sharebench_sweep.yaml", "sharebench_multi_node.yaml"):
        spec = next(yaml.safe_load_all((ROOT / "pipelines" / name).read_text()))
        for ex in spec["deploymentSpec"]["executors"].values():
            args = ex["container"]["args"]
            out[args[args.index("--function_to_execute") + 1]] = ex["container"]
    return out


def test_every_executor_of_the_committed_yaml_runs_in_the_image(docker_sweep, image):
    """Each executor's program (command) of the committed YAML ran in a container: the sweep's through
    DockerRunner (the same command, compared here), compare_nodes (multi-node only) with `podman run`
    as a pod runs it, its executor input in place of {{$}}."""
    executors = committed_executors()
    for function, container in executors.items():
        if function in RAN:
            assert RAN[function] == container["command"], f"{function}: not the committed YAML's program"
    # advise_pool runs only with a Prometheus URL (none in this sweep); its step is run on the CPU against a
    # real Prometheus by tests/kfp/test_advise_step.py, outside the image
    assert set(executors) - set(RAN) == {"compare_nodes", "advise_pool"}

    results = docker_sweep / "collect-results" / "results"
    out = docker_sweep / "compare-by-podman"
    out.mkdir(mode=0o777)

    def artifact(uri: str, schema: str) -> dict:
        return {"artifacts": [{"uri": uri, "metadata": {}, "type": {"schemaTitle": schema}}]}

    executor_input = {
        "inputs": {
            "artifacts": {
                "results": {
                    "artifacts": [{"uri": str(results), "metadata": {}, "type": {"schemaTitle": "system.Dataset"}}] * 2
                }
            }
        },
        "outputs": {
            "artifacts": {
                "report_html": artifact(str(out / "report_html"), "system.HTML"),
                "report_md": artifact(str(out / "report_md"), "system.Markdown"),
                "plots": artifact(str(out / "plots"), "system.Dataset"),
            },
            "outputFile": str(out / "executor_output.json"),
        },
    }
    c = executors["compare_nodes"]
    args = [json.dumps(executor_input) if a == "{{$}}" else a for a in c["args"]]
    assert c["image"] == "{{$.inputs.parameters['pipelinechannel--image']}}"  # the run's `image` parameter
    podman(
        "run",
        "--rm",
        "--network",
        "none",
        "--user",
        UID,
        "--volume",
        f"{docker_sweep}:{docker_sweep}",
        "--entrypoint",
        c["command"][0],
        image,
        *c["command"][1:],
        *args,
    )
    page = (out / "report_html").read_text()
    assert page.lstrip().lower().startswith("<!doctype html") and "data:image/png;base64," in page
    assert any((out / "plots").glob("*.png"))


def test_a_failing_component_is_reported_failed(docker_local):
    """A component that exits non-zero in its container is a FAILURE (kubeflow/pipelines#13332)."""
    from sharebench.components.check_sweep import check_sweep

    with pytest.raises(RuntimeError, match=r"FAILURE"):
        check_sweep(
            modes=["no-such-mode"],
            gpu_model="",
            particle_counts=[300],
            repeats=1,
            warmup_repeats=0,
            turns=2,
            placement="processes",
            workload={},
            start_delay_s=1.0,
            operator_namespace="gpu-operator",
            reconfigure_timeout_s=60.0,
            force=False,
            node_access="agent",
            budget="",
        )


def test_pods_placement_cell_runs_replicas_in_two_containers(docker_local, container_opencl_spec):
    """(After the sweep, whose executors the test above counts; this one adds none.)"""
    """Placement 'pods': two replica containers on one CPU are one device, so the cell passes."""
    from sharebench.components import steps
    from sharebench.modes import parse_mode
    from sharebench.pipelines.sweep_pipeline import run_cell
    from sharebench.sweep import Cell
    from sharebench.sweep.grid import GridPlan, GridSettings, cell_value
    from sharebench.workloads import Workload

    lattice = container_lattice(docker_local)
    cell = Cell(parse_mode("timeslice:2"), 300, 1)
    workload = Workload(device=container_opencl_spec, lattice=lattice, seed=1)
    # the plan of a node's sweep as plan_sweep hands it on (built here: no node to put in the mode)
    plan = GridPlan("", "", "pods", (cell,), GridSettings(turns=2, workload=workload)).to_dict()
    placed = {"resource": "nvidia.com/gpu", "count": 1, "pods": [0, 1], "processes": 1, "replicas": 2}
    start_at = time.time() + 40.0  # both containers start, build and warm up before it
    task = run_cell(
        image=IMAGE,
        plan=plan,
        cell={**cell_value(cell), "start_at": start_at},
        placed={**placed, "node_selector": {}},
        pods=[0, 1],
        resource="nvidia.com/gpu",
        resource_count=1,
        node_selector={},
    )
    rows = steps.read_rows([task.output.path])
    assert [r["replica"] for r in rows] == [0, 1]
    assert {r["status"] for r in rows} == {"ok"} and {r["cell_status"] for r in rows} == {"ok"}
    assert len({r["device_uuid"] for r in rows}) == 1
