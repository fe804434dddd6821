"""The project image's Dockerfile, read and checked against the project itself (package set, layer
order, CUDA variants, sources, OpenCL ICD, user, caches, build context). tests/test_container.py builds
and runs it."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "Dockerfile"


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with line continuations joined and comments dropped."""
    out, buf = [], ""
    for line in text.splitlines():
        if not buf and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if buf and line.lstrip().startswith("#"):
            continue
        if line.rstrip().endswith("\\"):
            buf += line.rstrip()[:-1] + " "
            continue
        buf += line
        op, _, args = buf.strip().partition(" ")
        out.append((op.upper(), args.strip()))
        buf = ""
    assert not buf, "Dockerfile ends inside a continued line"
    return out


@pytest.fixture(scope="module")
def steps() -> list[tuple[str, str]]:
    return instructions(DOCKERFILE.read_text())


@pytest.fixture(scope="module")
def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def extras_closure(pyproject: dict, extras: set[str]) -> set[str]:
    """Requirement names a set of extras installs (following sharebench[...] self-references)."""
    opt = pyproject["project"]["optional-dependencies"]
    names, todo, seen = set(), list(extras), set()
    while todo:
        e = todo.pop()
        if e in seen:
            continue
        seen.add(e)
        for req in opt[e]:
            m = re.fullmatch(r"sharebench\[([^\]]+)\]", req.strip())
            if m:
                todo += [x.strip() for x in m.group(1).split(",")]
            else:
                names.add(re.split(r"[<>=!~;\[ ]", req, maxsplit=1)[0].lower())
    return names


def pip_installs(steps) -> list[list[str]]:
    """The arguments of every `pip install` in RUN instructions (options dropped)."""
    out = []
    for op, args in steps:
        if op != "RUN":
            continue
        for cmd in args.split("&&"):
            words = shlex.split(cmd)
            if "pip" in [Path(w).name for w in words[:3]] and "install" in words:
                rest = words[words.index("install") + 1 :]
                out.append([w for w in rest if not w.startswith("-")])
    return out


def test_base_is_a_cuda_runtime_image(steps):
    args = dict(a.split("=", 1) for op, a in steps if op == "ARG" and "=" in a)
    frm = [a for op, a in steps if op == "FROM"][0].split()[0]  # the first stage's base
    image = args.get(frm.strip("${}"), frm)
    assert re.fullmatch(r"nvidia/cuda:\d+\.\d+\.\d+-runtime-ubuntu\d\d\.\d\d", image), image


def build_args(steps) -> dict[str, str]:
    return dict(a.split("=", 1) for op, a in steps if op == "ARG" and "=" in a)


def test_installs_the_package_set_the_tests_use_from_pyproject(steps, pyproject):
    installs = pip_installs(steps)
    project = [w for words in installs for w in words if re.fullmatch(r"\.\[[a-z0-9,${}_A-Z]+\]", w)]
    assert len(project) == 1, f"the project is installed once from its pyproject: {installs}"
    cuda_major = build_args(steps)["CUDA_MAJOR"]
    extras = set(project[0][2:-1].replace("${CUDA_MAJOR}", cuda_major).split(","))
    # the test suite's set (Makefile: pip install -e '.[test]') ...
    assert "test" in extras
    assert "'.[test]'" in (ROOT / "Makefile").read_text()
    assert extras <= set(pyproject["project"]["optional-dependencies"])
    assert {"kfp", "kfp-kubernetes", "pocl-binary-distribution", "pytest", "docker"} <= extras_closure(
        pyproject, extras
    )
    # ... its dependencies read from pyproject.toml by docker/requirements.py for the same extras, and no
    # package list of its own that could drift from it
    runs = " ".join(a for op, a in steps if op == "RUN")
    extras_arg = project[0][2:-1]
    assert re.search(rf'requirements\.py \S*pyproject\.toml "{re.escape(extras_arg)}"\s+> /tmp/requirements\.txt', runs)
    others = [w for words in installs for w in words if w not in project and w not in ("pip", "/tmp/requirements.txt")]
    assert others == [], f"packages installed outside pyproject: {others}"
    # the CUDA path of the kernel (CuPy) is there too, for the CUDA major version of the build
    assert any(n.startswith(f"cupy-cuda{cuda_major}") for n in extras_closure(pyproject, extras))


def test_cuda_major_build_arg_picks_cupy_for_the_driver(steps, pyproject):
    """CUDA_MAJOR=12 (drivers R535-R570) and 13 (R580+) each name an extra with the matching CuPy wheel."""
    assert build_args(steps)["CUDA_MAJOR"] == "13"
    for major in ("12", "13"):
        assert extras_closure(pyproject, {f"cuda{major}"}) == {f"cupy-cuda{major}x"}
    assert extras_closure(pyproject, {"cuda"}) == {"cupy-cuda13x"}


def test_dependencies_are_installed_before_the_sources_are_copied(steps):
    """A source change rebuilds only the layers after the sources, not the 300 MB of dependencies; and the
    install layer depends on the requirement list alone (made in a stage of its own from pyproject.toml)."""
    stages = [i for i, (op, _) in enumerate(steps) if op == "FROM"]
    final = steps[stages[-1] :]
    copy_src = min(i for i, (op, a) in enumerate(final) if op == "COPY" and shlex.split(a)[0] == "src")
    deps = [i for i, (op, a) in enumerate(final) if op == "RUN" and "-r /tmp/requirements.txt" in a]
    project = [i for i, (op, a) in enumerate(final) if op == "RUN" and "--no-deps" in a]
    assert deps and project and deps[0] < copy_src < project[0]
    copied_before = [shlex.split(a) for op, a in final[: deps[0]] if op == "COPY"]
    assert copied_before == [["--from=requirements", "/tmp/requirements.txt", "/tmp/requirements.txt"]]
    (req_stage,) = [i for i in stages if steps[i][1].split()[-1] == "requirements"]
    req_copies = {w for op, a in steps[req_stage : stages[-1]] if op == "COPY" for w in shlex.split(a)[:-1]}
    assert req_copies == {"pyproject.toml", "docker/requirements.py"}


def test_requirements_script_follows_pyproject(pyproject):
    import importlib.util

    spec = importlib.util.spec_from_file_location("requirements", ROOT / "docker" / "requirements.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    reqs = module.requirements(pyproject, ["test", "cuda12"])
    names = {re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0].lower() for r in reqs}
    assert names == {
        re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0].lower() for r in pyproject["project"]["dependencies"]
    } | extras_closure(pyproject, {"test", "cuda12"})
    assert not any(r.startswith("sharebench") for r in reqs)
    with pytest.raises(SystemExit, match="no extra 'cuda11'"):
        module.requirements(pyproject, ["cuda11"])


def test_copies_every_source_folder_the_package_needs(steps, pyproject):
    copied = set()
    for op, args in steps:
        if op == "COPY" and not args.startswith("--from="):
            srcs = shlex.split(args)[:-1]
            copied |= {s.rstrip("/") for s in srcs if not s.startswith("--")}
    package_dirs = {d.split("/")[0] for d in pyproject["tool"]["setuptools"]["package-dir"].values() if d}
    assert package_dirs == {"src", "components", "pipelines"}
    assert package_dirs | {"pyproject.toml", pyproject["project"]["readme"]} <= copied
    for name in copied:
        assert (ROOT / name).exists(), f"COPY {name}: not in the repository"


def test_registers_the_nvidia_opencl_icd(steps):
    runs = " ".join(a for op, a in steps if op == "RUN")
    assert re.search(r'echo "?libnvidia-opencl\.so\.1"? > /etc/OpenCL/vendors/nvidia\.icd', runs)
    assert "ocl-icd-libopencl1" in runs
    # Debian's PoCL (3.1, LLVM 15) for the CPU: pyopencl's bundled PoCL 3.0 refuses newer CPUs
    assert "pocl-opencl-icd" in runs
    env = " ".join(a for op, a in steps if op == "ENV")
    assert re.search(r"NVIDIA_DRIVER_CAPABILITIES=\S*compute", env)


def test_runs_as_a_non_root_user_with_the_kernel_caches_prebuilt(steps):
    users = [a for op, a in steps if op == "USER"]
    assert users and users[-1].split(":")[0] not in ("root", "0")
    last_user = max(i for i, (op, _) in enumerate(steps) if op == "USER")
    warm = [i for i, (op, a) in enumerate(steps) if op == "RUN" and "sharebench track" in a]
    assert warm and min(warm) > last_user, "caches are filled as the runtime user, so they stay usable"
    env = " ".join(a for op, a in steps if op == "ENV")
    assert "SHAREBENCH_CACHE=" in env and "POCL_CACHE_DIR=" in env
    # the warm-up is the kernel's own `sharebench track`, on both CPU paths
    (warm_run,) = [steps[i][1] for i in warm]
    assert "--device cpu" in warm_run and "--device opencl" in warm_run


def test_warm_up_command_runs_here(steps):
    """The build-time warm-up command itself runs (on this machine's CPU paths)."""
    import subprocess
    import sys

    from sharebench.devices import list_devices

    if "opencl" not in {d.backend for d in list_devices()}:
        pytest.skip("no OpenCL device here (PoCL: pip install -e '.[pocl]')")
    (warm,) = [a for op, a in steps if op == "RUN" and "sharebench track" in a]
    for cmd in warm.split("&&"):
        argv = shlex.split(cmd)
        assert argv[0] == "sharebench"
        proc = subprocess.run(
            [sys.executable, "-m", "sharebench", *argv[1:]], capture_output=True, text=True, timeout=600
        )
        assert proc.returncode == 0, proc.stderr
        device = argv[argv.index("--device") + 1]
        assert re.search(rf"^context\s+{device}$", proc.stdout, re.M), proc.stdout


def test_build_context_leaves_out_the_venv_and_git():
    ignored = {
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert {".git", ".venv", "tests"} <= ignored
    assert not {"src", "components", "pipelines", "pyproject.toml", "README.md"} & ignored


def test_image_name_in_readme_matches_the_one_setting():
    from sharebench.components.image import IMAGE_NAME, IMAGE_TAG

    readme = (ROOT / "docs" / "readme" / "kfp.md").read_text()
    assert f"docker build -t {IMAGE_NAME}:{IMAGE_TAG} ." in readme
