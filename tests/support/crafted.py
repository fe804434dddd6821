"""A crafted sweep, row by row, whose tables are computed by hand (tests/analysis/test_analysis.py).

The crafted sweep (written with the real ResultsWriter, read back with load_results):

CPU, 1,000 particles x 10 turns
  exclusive     r0 (warm-up) 50 s; r1..r3 track_s 10, 11, 12          -> T_1 = 11
  timeslice:2   r1 windows [100,121] [100.1,120.5]  span 21
                r2 windows [200,224] [200,223]      span 24
                r3 windows [300,323] [300,322]      span 23
                r4 windows [400,420] [410,430]      overlap 50%  -> flagged, excluded
  mps:2         r1 replica 1 crashed -> failed, excluded
                r2 span 30, r3 span 32 (only 2 measured repeats -> flagged)
  partition:2   1 core each (exclusive had 2); mean replica track_s 21, 23, 24
GPU (cuda), 2,000 particles x 10 turns, an H200 (132 SMs)
  exclusive     5.0, 5.2, 5.4 -> T_full = 5.2
  mig:3g        2 instances of 3g.71gb (60 SMs); mean track_s 12.1, 12.4, 12.3
                r4 replicas report different parent GPUs -> excluded
"""

from __future__ import annotations

BASE = dict(
    sweep_id="crafted",
    engine="simpletrack",
    lattice="generated",
    turns=10,
    host="h",
    status="ok",
    error="",
    cell_status="ok",
    cell_error="",
)
CPU = dict(
    BASE,
    device_class="cpu",
    backend="opencl",
    device_spec="opencl:0.0",
    particles=1000,
    device_uuid="cpu-host",
    parent_uuid="cpu-host",
)
GPU = dict(BASE, device_class="gpu", backend="cuda", device_spec="cuda:0", particles=2000)


def cell(base, mode, repeat, windows, **extra):
    kind = mode.split(":")[0]
    rows = []
    for i, w in enumerate(windows):
        start, end = w[:2]
        row = dict(
            base,
            mode=mode,
            mode_kind=kind,
            replicas=len(windows),
            replica=i,
            repeat=repeat,
            warmup=repeat == 0,
            cell_id=f"{mode}_p{base['particles']}_r{repeat}",
            track_start=start,
            track_end=end,
            track_s=end - start,
        )
        row.update(extra)
        if len(w) > 2:
            row.update(w[2])
        rows.append(row)
    return rows


def crafted_rows():
    rows = []
    rows += cell(CPU, "exclusive", 0, [(0, 50)], cores=2)
    for r, t in zip((1, 2, 3), (10, 11, 12)):
        rows += cell(CPU, "exclusive", r, [(10 * r, 10 * r + t)], cores=2)
    rows += cell(CPU, "timeslice:2", 1, [(100, 121), (100.1, 120.5)], cores=2)
    rows += cell(CPU, "timeslice:2", 2, [(200, 224), (200, 223)], cores=2)
    rows += cell(CPU, "timeslice:2", 3, [(300, 323), (300, 322)], cores=2)
    rows += cell(CPU, "timeslice:2", 4, [(400, 420), (410, 430)], cores=2)
    rows += cell(
        CPU,
        "mps:2",
        1,
        [(500, 530), (500, 531, dict(status="failed", error="boom", track_s=None))],
        cell_status="failed",
        cell_error="replica 1: boom",
    )
    rows += cell(CPU, "mps:2", 2, [(600, 630), (600, 629)])
    rows += cell(CPU, "mps:2", 3, [(700, 732), (700, 731)])
    for r, (a, b) in zip((1, 2, 3), ((20, 22), (23, 23), (22, 26))):
        rows += cell(
            CPU,
            "partition:2",
            r,
            [(800 + 100 * r, 800 + 100 * r + a, dict(cpus="0")), (800 + 100 * r, 800 + 100 * r + b, dict(cpus="1"))],
            cores=1,
        )
    for r, t in zip((1, 2, 3), (5.0, 5.2, 5.4)):
        rows += cell(
            GPU, "exclusive", r, [(2000 + r * 10, 2000 + r * 10 + t)], sms=132, device_uuid="GPU-a", parent_uuid="GPU-a"
        )
    mig = dict(sms=60, mig_profile="3g.71gb", parent_uuid="GPU-a")
    for r, (a, b) in zip((1, 2, 3), ((12.0, 12.2), (12.4, 12.4), (12.2, 12.4))):
        t0 = 3000 + 100 * r
        rows += cell(
            GPU, "mig:3g", r, [(t0, t0 + a, dict(device_uuid="MIG-1")), (t0, t0 + b, dict(device_uuid="MIG-2"))], **mig
        )
    rows += cell(
        GPU,
        "mig:3g",
        4,
        [(4000, 4012, dict(device_uuid="MIG-1")), (4000, 4012, dict(device_uuid="MIG-9", parent_uuid="GPU-b"))],
        **mig,
    )
    return rows
