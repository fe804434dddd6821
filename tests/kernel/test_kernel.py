"""The Simpletrack kernel: agreement with xtrack, contexts, one run, the
replica process and its barrier, the kernel cache, memory checks, bad input,
the engines and element classes, the benchmark."""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose

from sharebench.cli import main as cli_main
from sharebench.devices import list_devices, resolve_device
from sharebench.errors import UserError
from sharebench.kernel import (
    Barrier,
    BenchConfig,
    RunConfig,
    RunRecord,
    bytes_per_particle,
    check_fits,
    make_engine,
    run_bench,
    run_replica,
)
from sharebench.kernel.bench import to_markdown
from sharebench.kernel.cache import cache_dir
from sharebench.kernel.distribution import linear_optics, matched_gaussian
from sharebench.kernel.elements import ELEMENTS, pack_line, track_numpy
from sharebench.kernel.engines.simpletrack import (
    SOURCE_PATH,
    CpuBackend,
    SimpletrackEngine,
)
from sharebench.kernel.engines.xtrack import XtrackEngine, optimize_on_host
from sharebench.kernel.lattice import get_line_cached, get_packed, load_line
from sharebench.kernel.state import COORDS, make_state
from sharebench.results.store import read_json
from sharebench.workloads import REPLICA_MODULE, ReplicaJob, Workload
from support.contexts import ACCELERATORS, CONTEXTS, cpu_opencl_spec, device_of

pytestmark = pytest.mark.slow  # replicas, bench and CLI runs: 413 s measured under load 7 on 2 cores

warnings.simplefilter("ignore", FutureWarning)


@pytest.fixture(scope="session")
def ring_line():
    return get_line_cached(None)


@pytest.fixture(scope="session")
def lines(ring_line, lhc_line_path):
    return {"ring": ring_line, "lhc": load_line(lhc_line_path)}


def _particles(line, n=96, n_lost=8, seed=3):
    """Matched Gaussian particles plus a few with large angles that xtrack's
    global aperture (1 m) removes within the first turns."""
    packed = pack_line(line)
    x6 = matched_gaussian(linear_optics(packed), packed.beta0, packed.gamma0, n, seed=seed)
    x6[1, :n_lost] = np.linspace(2e-3, 2e-2, n_lost)  # px: lost after 50..500 m of drift
    x6[3, n_lost : 2 * n_lost] = -np.linspace(2e-3, 2e-2, n_lost)
    return packed, x6


def _xtrack_reference(line, x6, turns):
    import xobjects as xo
    import xtrack as xt

    if line.tracker is None:
        line.build_tracker(_context=xo.ContextCpu())
    ref = line.particle_ref
    p = xt.Particles(
        p0c=float(ref.p0c[0]), mass0=float(ref.mass0), q0=float(ref.q0), **{k: x6[i] for i, k in enumerate(COORDS[:6])}
    )
    start = np.array([getattr(p, k).copy() for k in COORDS])
    line.track(p, num_turns=turns)
    order = np.argsort(p.particle_id)
    end = np.array([getattr(p, k)[order] for k in COORDS])
    counters = np.array([p.state[order], p.at_turn[order], p.at_element[order]])
    return start, end, counters


def _simpletrack(device, packed, start, turns, beta0):
    coords, counters = make_state(*start[:6], beta0, *start[6:])
    eng = SimpletrackEngine(device, packed)
    eng.build()
    eng.upload(coords, counters)
    eng.track(turns)
    return eng.download()


def _assert_agree(end, counters, ref_end, ref_counters, loss_element=True):
    alive_ref = ref_counters[0] > 0
    np.testing.assert_array_equal(counters[0] > 0, alive_ref, err_msg="survival differs")
    np.testing.assert_array_equal(counters[1], ref_counters[1], err_msg="at_turn differs")
    lost = ~alive_ref
    if loss_element:  # element indices shift when optimize_for_tracking removes markers
        np.testing.assert_array_equal(counters[2][lost], ref_counters[2][lost], err_msg="loss element differs")
    for i, name in enumerate(COORDS[:6]):
        rms = np.std(ref_end[i, alive_ref])
        assert_allclose(end[i, alive_ref], ref_end[i, alive_ref], rtol=0, atol=1e-9 * rms, err_msg=name)


@pytest.fixture(scope="session")
def xtrack_reference(lines):
    """xtrack's tracking of the test particles, once per lattice."""
    cache = {}

    def get(lattice):
        if lattice not in cache:
            line = lines[lattice]
            packed, x6 = _particles(line)
            cache[lattice] = (packed, x6, *_xtrack_reference(line, x6, 10))
        return cache[lattice]

    return get


@pytest.mark.parametrize("device", CONTEXTS)
@pytest.mark.parametrize("lattice", ["ring", "lhc"])
def test_simpletrack_agrees_with_xtrack(xtrack_reference, lattice, device):
    """Every coordinate within 1e-9 of its RMS spread after 10 turns, identical survival."""
    packed, x6, start, ref_end, ref_counters = xtrack_reference(lattice)
    assert 0 < np.sum(ref_counters[0] <= 0) < len(x6[0]), "the test needs both lost and surviving particles"
    end, counters = _simpletrack(device_of(device), packed, start, 10, packed.beta0)
    _assert_agree(end, counters, ref_end, ref_counters)


def test_xtrack_engine_tracks_the_same(ring_line):
    """The xtrack engine (here without optimize_for_tracking, whose CPU build
    takes minutes) returns particles in their original order, as simpletrack."""
    packed, x6 = _particles(ring_line)
    coords, counters = make_state(*x6, packed.beta0)
    xe = XtrackEngine(resolve_device("cpu"), ring_line, optimize=False)
    xe.build()
    xe.upload(coords, counters)
    xe.track(10)
    ref_end, ref_counters = xe.download()
    end, cnt = _simpletrack(resolve_device("cpu"), packed, coords, 10, packed.beta0)
    _assert_agree(end, cnt, ref_end, ref_counters)


def test_xtrack_optimized_on_host_tracks_the_same(lines):
    """The GPU path of the xtrack engine: optimize_for_tracking on a host copy,
    then the tracker built in another context (here a second CPU context: the
    elements move buffers as they do into a CuPy one); same result as simpletrack."""
    import xobjects as xo

    line = copy.deepcopy(lines["ring"])
    line.discard_tracker()
    n_before = len(line.element_names)
    packed, x6 = _particles(line)
    target = xo.ContextCpu()
    optimize_on_host(line, target)
    assert line.tracker.io_buffer.context is target
    assert len(line.element_names) < n_before  # markers removed, drifts merged
    xe = XtrackEngine(resolve_device("cpu"), line, optimize=False)
    xe.context = target
    coords, counters = make_state(*x6, packed.beta0)
    xe.upload(coords, counters)
    xe.track(10)
    ref_end, ref_counters = xe.download()
    end, cnt = _simpletrack(resolve_device("cpu"), packed, coords, 10, packed.beta0)
    _assert_agree(end, cnt, ref_end, ref_counters, loss_element=False)


@pytest.mark.parametrize("device", ACCELERATORS)
def test_cross_context_vs_cpu(ring_line, device):
    """The same source built for OpenCL (PoCL here) or CUDA and for the CPU (OpenMP) agrees over 30 turns."""
    other = device_of(device)
    packed, x6 = _particles(ring_line, n=64)
    coords, _counters = make_state(*x6, packed.beta0)
    a = _simpletrack(resolve_device("cpu"), packed, coords, 30, packed.beta0)
    b = _simpletrack(other, packed, coords, 30, packed.beta0)
    _assert_agree(b[0], b[1], a[0], a[1])


def test_unsupported_element_is_named():
    import xtrack as xt

    line = xt.Line(elements=[xt.Drift(length=1.0), xt.Quadrupole(k1=0.01, length=1.0)], element_names=["d", "qf.thick"])
    line.particle_ref = xt.Particles(p0c=7e12)
    with pytest.raises(UserError, match=r"'qf.thick' has type Quadrupole.*supported: Drift, Multipole"):
        pack_line(line)


@pytest.mark.parametrize(
    "xtrack_type, options, message",
    [
        (
            "Multipole",
            {"knl": [0, 1e-3], "length": 1.0, "isthick": True, "model": "mat-kick-mat"},
            (
                "element 'e' (thick Multipole) uses model mat-kick-mat/integrator adaptive; the simpletrack engine supports "
                "drift-kick-drift-expanded with the uniform integrator"
            ),
        ),
        (
            "Multipole",
            {"knl": [0, 1e-3], "length": 1.0, "isthick": True, "integrator": "teapot"},
            (
                "element 'e' (thick Multipole) uses model adaptive/integrator teapot; the simpletrack engine supports "
                "drift-kick-drift-expanded with the uniform integrator"
            ),
        ),
        (
            "Cavity",
            {"voltage": 1e6, "frequency": 4e8, "model": "drift-kick-drift-exact"},
            "element 'e' (Cavity) uses model drift-kick-drift-exact/integrator adaptive; only the defaults are supported",
        ),
        (
            "Multipole",
            {"knl": [0, 1e-3], "shift_x": 1e-3},
            "element 'e' (Multipole) has shift_x=0.001: misaligned elements are not supported by the simpletrack engine",
        ),
    ],
)
def test_unmodelled_element_options_are_named(xtrack_type, options, message):
    import xtrack as xt

    line = xt.Line(elements=[getattr(xt, xtrack_type)(**options)], element_names=["e"])
    line.particle_ref = xt.Particles(p0c=7e12)
    with pytest.raises(UserError) as info:
        pack_line(line)
    assert str(info.value) == message


# ---------------------------------------------------------------------------
# one run, records, the replica process and its barrier
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("device", CONTEXTS)
def test_run_replica_record(device, tmp_path):
    dev = device_of(device)
    cfg = RunConfig(device=dev.spec, particles=256, turns=3)
    rec = run_replica(cfg, barrier=Barrier(ready_file=str(tmp_path / "ready")))
    assert (tmp_path / "ready").exists()
    assert (rec.engine, rec.device, rec.context, rec.particles, rec.turns) == (
        "simpletrack",
        dev.spec,
        dev.backend,
        256,
        3,
    )
    assert rec.elements == get_packed(None).n_elements
    assert rec.survived == 256
    assert rec.track_s > 0 and rec.track_end > rec.track_start
    # epoch seconds near 1.7e9 hold about 2.4e-7 s resolution: a microsecond, not a relative tolerance
    assert_allclose(rec.track_end - rec.track_start, rec.track_s, rtol=0, atol=1e-6)
    assert_allclose(rec.element_passes_per_s, 256 * 3 * rec.elements / rec.track_s, rtol=1e-9)
    assert rec.device_uuid == dev.uuid != ""
    assert rec.setup_s >= rec.compile_s >= 0
    assert "record_version" not in rec.to_dict()  # the store's schema_version versions a record
    again = RunRecord.from_dict(json.loads(json.dumps(rec.to_dict())))
    assert again == rec


@pytest.mark.parametrize("device", ACCELERATORS)
def test_same_seed_same_checksum_across_contexts(device):
    other = device_of(device)
    a = run_replica(RunConfig(device="cpu", particles=200, turns=2, seed=5))
    b = run_replica(RunConfig(device=other.spec, particles=200, turns=2, seed=5))
    c = run_replica(RunConfig(device="cpu", particles=200, turns=2, seed=6))
    assert_allclose(b.checksum, a.checksum, rtol=1e-9)
    assert c.checksum != a.checksum


def _replica(cfg: dict, out, env=None):
    """A replica process for the flat ``cfg`` (workload, run and barrier fields), through its job file."""
    options = dict(cfg)
    workload = Workload(**{k: options.pop(k) for k in ("engine", "device", "lattice", "seed") if k in options})
    job = ReplicaJob.of(workload, particles=options.pop("particles", 10_000), turns=options.pop("turns", 10), **options)
    path = str(out) + ".cfg.json"
    with open(path, "w") as fh:
        json.dump(job.to_dict(), fh)
    return subprocess.Popen(
        [sys.executable, "-m", REPLICA_MODULE, "--config", path, "--out", str(out)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_replicas_start_together_at_the_barrier(tmp_path):
    """Two replica processes: ready files appear, both wait for the start file
    (holding an epoch instant) and start tracking within a few ms of it."""
    procs = []
    for i in range(2):
        cfg = {
            "device": "cpu",
            "particles": 64,
            "turns": 2,
            "replica": i,
            "cpus": [i % os.cpu_count()],
            "ready_file": str(tmp_path / f"ready.{i}"),
            "start_file": str(tmp_path / "start"),
        }
        procs.append(_replica(cfg, tmp_path / f"rec.{i}.json"))
    deadline = time.time() + 120
    while not all((tmp_path / f"ready.{i}").exists() for i in range(2)):
        assert time.time() < deadline, "replicas never became ready"
        assert all(p.poll() is None for p in procs), [p.communicate() for p in procs]
        time.sleep(0.05)
    time.sleep(0.3)
    assert not any((tmp_path / f"rec.{i}.json").exists() for i in range(2)), "a replica did not wait"
    instant = time.time() + 0.5
    (tmp_path / "start").write_text(f"{instant:.6f}\n")
    for p in procs:
        _out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    recs = [read_json(tmp_path / f"rec.{i}.json", "record") for i in range(2)]
    starts = [r["track_start"] for r in recs]
    assert all(s >= instant for s in starts)
    assert max(starts) - min(starts) < 0.05
    assert [r["replica"] for r in recs] == [0, 1]


def test_replica_failure_writes_one_line_error(tmp_path):
    p = _replica({"device": "cpu", "particles": 10, "lattice": str(tmp_path / "missing.json")}, tmp_path / "rec.json")
    _out, err = p.communicate(timeout=120)
    assert p.returncode == 1
    assert list(json.loads((tmp_path / "rec.json").read_text())) == ["kind", "schema_version", "error", "attempt"]
    rec = read_json(tmp_path / "rec.json", "record")
    assert rec == {"error": f"lattice file '{tmp_path / 'missing.json'}' not found", "attempt": rec["attempt"]}
    assert isinstance(rec["attempt"], str)
    assert "Traceback" not in err


@pytest.mark.parametrize("device", CONTEXTS)
def test_kernel_built_once_per_machine(device, tmp_path):
    """A second process with the same (empty at first) cache reuses the compiled kernel: it says so
    in its record and writes nothing new into the caches. (How much time the cache saves depends on
    the device: NVIDIA's OpenCL and NVRTC build this kernel in tenths of a second, so no timing here.)"""
    dev = device_of(device)
    # fresh kernel caches: ours (CPU .so, pyopencl binaries), CuPy's and PoCL's own
    env = dict(
        os.environ,
        SHAREBENCH_CACHE=str(tmp_path / "cache"),
        POCL_CACHE_DIR=str(tmp_path / "pocl"),
        CUPY_CACHE_DIR=str(tmp_path / "cupy"),
    )
    # a fresh kernel cache, but the (slow to generate) lattice caches copied in
    get_packed(None)
    shutil.copytree(cache_dir() / "lattices", tmp_path / "cache" / "lattices")
    if (cache_dir() / "optics").exists():
        shutil.copytree(cache_dir() / "optics", tmp_path / "cache" / "optics")
    recs, files = [], [_cache_files(tmp_path / "cache", tmp_path / "cupy")]
    for i in range(2):
        p = _replica(
            {"device": dev.spec, "particles": 32, "turns": 1, "warmup_turns": 0}, tmp_path / f"rec{i}.json", env=env
        )
        _out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        recs.append(read_json(tmp_path / f"rec{i}.json", "record"))
        files.append(_cache_files(tmp_path / "cache", tmp_path / "cupy"))
    first, second = recs
    assert first["extra"]["kernel_cache_hit"] is False
    assert second["extra"]["kernel_cache_hit"] is True
    assert set(files[1]) - set(files[0]), "the first process left no compiled kernel in the caches"
    assert files[2] == files[1], "the second process compiled the kernel again"


def _cache_files(*roots):
    """Every file under ``roots`` (lock files aside) with its size and inode: a file compiled again
    and moved into place has a new inode, a marker touched on a cache hit keeps its own."""
    return {
        f: (f.stat().st_size, f.stat().st_ino)
        for root in roots
        if root.exists()
        for f in root.rglob("*")
        if f.is_file() and not f.name.endswith(".lock")
    }


def test_cpu_kernel_builds_from_a_folder_with_a_broken_pyproject(tmp_path):
    """cffi compiles through setuptools, which reads pyproject.toml in the current folder: a user's
    (or an old setuptools') view of it must not break the kernel build."""
    work = tmp_path / "project"
    work.mkdir()
    (work / "pyproject.toml").write_text('[project]\nname = "x"\nlicense = 7\n')
    get_packed(None)
    shutil.copytree(cache_dir() / "lattices", tmp_path / "cache" / "lattices")
    env = dict(os.environ, SHAREBENCH_CACHE=str(tmp_path / "cache"))
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps(ReplicaJob.of(Workload(device="cpu"), particles=16, turns=1, warmup_turns=0).to_dict()))
    out = subprocess.run(
        [sys.executable, "-m", REPLICA_MODULE, "--config", str(cfg), "--out", str(tmp_path / "rec.json")],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    rec = read_json(tmp_path / "rec.json", "record")
    assert rec["extra"]["kernel_cache_hit"] is False and rec["survived"] == 16


# ---------------------------------------------------------------------------
# memory, devices, bad input
# ---------------------------------------------------------------------------
def test_bytes_per_particle_covers_xtrack_particles():
    import xtrack as xt

    n = 100_000
    p = xt.Particles(p0c=7e12, x=np.zeros(n))
    measured = p._buffer.capacity / n  # noqa: SLF001 - xtrack 0.118.4 has no public way to its buffer
    assert 200 < measured <= bytes_per_particle("xtrack")
    assert bytes_per_particle("simpletrack") == 8 * 12


def test_check_fits_message_has_the_numbers():
    check_fits(1000, 10**9, "simpletrack")
    with pytest.raises(
        UserError,
        match=r"^30,000,000 particles need 2,947,108,864 bytes with the simpletrack engine "
        r"\(96 B/particle \+ 67,108,864 B overhead\) "
        r"but the memory is 1,000,000,000 bytes; "
        r"at most 9,717,616 particles fit$",
    ):
        check_fits(30_000_000, 10**9, "simpletrack")


def test_run_refuses_particles_that_do_not_fit():
    t0 = time.perf_counter()
    with pytest.raises(UserError, match=r"need .*mem_limit_bytes"):
        run_replica(RunConfig(device="cpu", particles=5_000_000, mem_limit_bytes=200 * 2**20))
    assert time.perf_counter() - t0 < 5, "refused only after building"


@pytest.mark.parametrize(
    "spec, fragment",
    [
        ("gpu", "bad device 'gpu': allowed are auto, cpu, cuda[:N], opencl[:P.D]"),
        ("opencl:1", "bad device 'opencl:1'"),
        ("cuda:x", "bad device 'cuda:x'"),
        ("opencl:7.0", "device 'opencl:7.0' not found"),
    ],
)
def test_bad_device_spec(spec, fragment):
    with pytest.raises(UserError, match=fragment.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(")):
        resolve_device(spec)


def test_cuda_absent_is_a_user_error():
    if importlib.util.find_spec("cupy") is not None:
        pytest.skip("CuPy is installed here")
    with pytest.raises(UserError, match="no CUDA GPU found"):
        resolve_device("cuda")


def test_auto_and_device_list():
    devs = list_devices()
    assert devs[-1].spec == "cpu" and devs[-1].kind == "cpu"
    auto = resolve_device("auto")
    assert auto.spec in [d.spec for d in devs]
    if not any(d.kind == "gpu" for d in devs):
        assert auto.spec == "cpu"


def test_xtrack_engine_refused_on_pocl():
    pocl = cpu_opencl_spec()  # PoCL by what it is: on a GPU machine opencl:0.0 may be NVIDIA's
    with pytest.raises(UserError, match="xtrack engine does not build on .*PoCL"):
        run_replica(RunConfig(engine="xtrack", device=pocl, particles=10, turns=1))


@pytest.mark.parametrize(
    "field, value, fragment",
    [
        ("engine", "sixtrack", "bad engine 'sixtrack': allowed are simpletrack, xtrack"),
        ("particles", 0, "bad particles 0"),
        ("turns", 2.5, "bad turns 2.5"),
        ("cpus", [], "bad cpus []"),
        ("sigma_z", -1.0, "bad sigma_z -1.0"),
    ],
)
def test_bad_run_config(field, value, fragment):
    with pytest.raises(UserError, match=fragment.replace("[", r"\[").replace("]", r"\]")):
        RunConfig(**{field: value})


def test_unknown_config_field():
    with pytest.raises(UserError, match="unknown run config field"):
        RunConfig.from_dict({"particle": 10})


# ---------------------------------------------------------------------------
# engines and element types
# ---------------------------------------------------------------------------
def test_make_engine_picks_the_engine_and_backend(ring_line):
    packed = get_packed(None)
    cpu = resolve_device("cpu")
    st = make_engine(RunConfig(engine="simpletrack", device="cpu", cpus=[0], block_size=64), cpu, None, packed)
    assert isinstance(st, SimpletrackEngine) and isinstance(st.backend, CpuBackend)
    assert (st.name, st.packed, st.backend.threads, st.compile_s, st.cache_hit) == (
        "simpletrack",
        packed,
        1,
        0.0,
        False,
    )
    xe = make_engine(RunConfig(engine="xtrack", device="cpu", optimize=False), cpu, ring_line, packed)
    assert isinstance(xe, XtrackEngine) and (xe.name, xe.line, xe.optimize, xe.threads) == (
        "xtrack",
        ring_line,
        False,
        None,
    )


def test_every_element_type_names_its_c_code():
    """Each element class's kind codes are the #defines of simpletrack.c, and its macros are there."""
    source = SOURCE_PATH.read_text()
    defines = {name: int(code) for name, code in re.findall(r"^#define (ST_[A-Z_]+) (\d+)$", source, re.MULTILINE)}
    codes = {}
    for element in ELEMENTS:
        codes.update(element.kinds)
        for macro in element.c_macros:
            assert f"#define {macro}(" in source, (element.__name__, macro)
    assert codes == defines


def test_numpy_steps_agree_with_the_kernel():
    """Every element type and variant (expanded and exact drift, thin, thick, empty thick and bent
    multipoles, cavities with frequency or harmonic, shift, rotation, marker): the numpy steps and
    the CPU kernel agree."""
    import xtrack as xt

    els = [
        xt.Drift(length=1.5),
        xt.Drift(length=0.7, model="exact"),
        xt.Multipole(
            knl=[1e-4, 1e-3, 2e-2], ksl=[0, 0, 1e-3], length=2.0, isthick=True, hxl=1e-3, num_multipole_kicks=3
        ),
        xt.Multipole(knl=[0, 0], ksl=[0, 0], length=1.0, isthick=True),
        xt.Multipole(knl=[1e-4, 1e-3, 0, 5.0], ksl=[1e-5, 0, 2e-2, 0], hxl=2e-4, length=0.5),
        xt.Cavity(voltage=3e6, frequency=4e8, lag=170.0, length=0.4, num_kicks=2),
        xt.Cavity(voltage=1e6, harmonic=35640, lag=180.0),
        xt.XYShift(dx=1e-4, dy=-2e-4),
        xt.SRotation(angle=3.0),
        xt.Marker(),
        xt.Drift(length=2.0),
    ]
    line = xt.Line(elements=els, element_names=[f"e{i}" for i in range(len(els))])
    line.particle_ref = xt.Particles(p0c=7e12)
    packed = pack_line(line)
    assert packed.n_elements == len(els) - 1  # the marker is dropped
    assert packed.kinds.tolist() == [1, 2, 4, 4, 3, 5, 5, 6, 7, 1]
    rng = np.random.default_rng(4)
    x6 = rng.normal(size=(6, 20)) * np.array([1e-3, 1e-5, 1e-3, 1e-5, 1e-2, 1e-4])[:, None]
    coords, _counters = make_state(*x6, packed.beta0)
    end, cnt = _simpletrack(resolve_device("cpu"), packed, coords, 3, packed.beta0)
    assert np.all(cnt[0] == 1) and np.all(cnt[1] == 3)
    assert_allclose(track_numpy(packed, coords, 3), end, rtol=1e-12, atol=1e-15)


# ---------------------------------------------------------------------------
# the benchmark
# ---------------------------------------------------------------------------
def test_run_bench_writes_json_and_markdown(tmp_path):
    """Both engines on the CPU, and a particle count over the memory limit kept as a cell not run."""
    config = BenchConfig(
        engines="simpletrack, xtrack",
        devices=["cpu"],
        particles="64,1e6",
        turns=1,
        repeats=2,
        out_dir=tmp_path,
        optimize=False,
        mem_limit_bytes=100 * 2**20,
        command="sharebench bench x",
    )
    doc = run_bench(config)
    assert read_json(tmp_path / "bench.json", "bench") == doc
    assert list(json.loads((tmp_path / "bench.json").read_text()))[:3] == ["kind", "schema_version", "command"]
    by = {(s["engine"], s["particles"]): s for s in doc["summary"]}
    assert by[("simpletrack", 64)]["repeats"] == 2 and by[("simpletrack", 64)]["element_passes_per_s_median"] > 0
    assert by[("simpletrack", 64)]["survived_min"] == 64
    assert by[("xtrack", 64)]["elements"] == by[("simpletrack", 64)]["elements"]
    assert "mem_limit_bytes" in by[("simpletrack", 1_000_000)]["error"]
    assert [r["replica"] for r in doc["records"]] == [0, 1, 0, 1]
    md = (tmp_path / "bench.md").read_text()
    assert md == to_markdown(doc)
    assert "Command: `sharebench bench x`" in md and "| simpletrack | cpu |" in md and "not run:" in md


def test_bench_config_normalises_and_builds_run_configs():
    config = BenchConfig(
        engines="simpletrack, XTRACK",
        devices="cpu, opencl:0.0",
        particles="1e3,64,1e3",
        cpus="0-1",
        turns="2",
        repeats=1,
    )
    assert (config.engines, config.devices, config.particles) == (
        ["simpletrack", "xtrack"],
        ["cpu", "opencl:0.0"],
        [1000, 64],
    )
    assert (config.cpus, config.turns) == ([0, 1], 2)
    cfg = config.run_config("xtrack", "cpu", 64, replica=3)
    assert (cfg.engine, cfg.device, cfg.particles, cfg.turns, cfg.replica, cfg.cpus) == (
        "xtrack",
        "cpu",
        64,
        2,
        3,
        [0, 1],
    )


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("engines", "sixtrack", "bad engine 'sixtrack': allowed are simpletrack, xtrack"),
        ("engines", " , ", "no engines given; allowed: a comma-separated list of simpletrack, xtrack"),
        ("devices", "gpu", "bad device 'gpu': allowed are auto, cpu, cuda[:N], opencl[:P.D]"),
        ("particles", "100,0", "bad particle counts '0'; allowed: whole numbers > 0 such as 10000 or 5e6"),
        ("repeats", 0, "bad repeats 0; allowed: a whole number >= 1"),
        ("turns", 2.5, "bad turns 2.5; allowed: a whole number >= 1"),
        ("cpus", "x", "bad cpus 'x'; allowed: a list of core numbers like 0-3,6"),
        ("sigma_z", -1.0, "bad sigma_z -1.0: a number >= 0 is allowed"),
    ],
)
def test_bad_bench_config(field, value, message):
    with pytest.raises(UserError) as info:
        BenchConfig(**{field: value})
    assert str(info.value) == message


# ---------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------
def test_cli_devices_json(capsys):
    assert cli_main(["devices", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["auto"] in [d["spec"] for d in doc["devices"]]


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["track", "--device", "tpu"],
            "sharebench: error: bad device 'tpu': allowed are auto, cpu, cuda[:N], opencl[:P.D]\n",
        ),
        (["track", "--engine", "madx"], "sharebench: error: bad engine 'madx': allowed are simpletrack, xtrack\n"),
        (
            ["track", "--particles", "2000000000", "--device", "cpu", "--mem-limit-bytes", "1000000000"],
            (
                "sharebench: error: 2,000,000,000 particles need 192,067,108,864 bytes with the simpletrack engine "
                "(96 B/particle + 67,108,864 B overhead) but the memory limit (mem_limit_bytes) is 1,000,000,000 bytes; "
                "at most 9,717,616 particles fit\n"
            ),
        ),
    ],
)
def test_cli_user_errors(argv, message, capsys):
    assert cli_main(argv) == 2
    assert capsys.readouterr().err == message


def test_cli_track_prints_record(capsys, tmp_path):
    out = tmp_path / "rec.json"
    assert cli_main(["track", "--device", "cpu", "--particles", "100", "--turns", "2", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "element_passes_per_s" in text
    rec = json.loads(out.read_text())
    assert rec["particles"] == 100 and rec["survived"] == 100


def test_cli_bench_writes_json_and_markdown(tmp_path, capsys):
    pocl = device_of("opencl")
    argv = [
        "bench",
        "--engines",
        "simpletrack,xtrack",
        "--devices",
        f"cpu,{pocl.spec}",
        "--particles",
        "64",
        "--turns",
        "1",
        "--repeats",
        "2",
        "--no-optimize",
        "--out",
        str(tmp_path),
    ]
    assert cli_main(argv) == 0
    doc = json.loads((tmp_path / "bench.json").read_text())
    assert doc["schema_version"] == 1
    by = {(s["engine"], s["device"]): s for s in doc["summary"]}
    assert by[("simpletrack", "cpu")]["repeats"] == 2 and by[("simpletrack", "cpu")]["element_passes_per_s_median"] > 0
    assert by[("simpletrack", pocl.spec)]["survived_min"] == 64
    assert by[("xtrack", "cpu")]["elements"] == by[("simpletrack", "cpu")]["elements"]
    assert "does not build" in by[("xtrack", pocl.spec)]["error"]
    md = (tmp_path / "bench.md").read_text()
    assert "| simpletrack | cpu |" in md and "not run:" in md
