"""The GPU's time-slice interval for a ``timeslice:N/INTERVAL`` cell: set, then put back.

The interval is a setting of the whole GPU (every process on it shares it), applied with
``nvidia-smi compute-policy -i GPU --set-timeslice=CODE`` (0 default, 1 short, 2 medium,
3 long; the codes NVIDIA's DRA driver uses for its ``timeSlicingConfig.interval``). So
sharebench changes it only when the user passes ``--allow-gpu-settings``, reads the value
before, and writes it back after the cell: on success, on error and on Ctrl-C (SIGINT and
SIGTERM are held back while the old value is written, then delivered). A value it cannot
read is never changed: there would be nothing to put back.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import signal
import subprocess
from collections.abc import Callable, Iterable, Iterator

from sharebench.devices import DeviceInfo
from sharebench.errors import UserError, one_line
from sharebench.modes import INTERVALS, Mode

INTERVAL_CODES = {name: code for code, name in enumerate(INTERVALS)}
NVIDIA_SMI = "nvidia-smi"
FLAG = "--allow-gpu-settings"


def check_allowed(modes: Iterable[Mode], allowed: bool) -> None:
    """Refuse, in one line, modes that would change the GPU's time-slice interval without ``allowed``."""
    wanting = [m.label for m in modes if m.interval is not None]
    if wanting and not allowed:
        raise UserError(
            f"{', '.join(wanting)}: a time-slice interval is a setting of the whole GPU "
            f"(nvidia-smi compute-policy --set-timeslice), shared with everyone on it; pass {FLAG} to let "
            "sharebench set it and put the previous value back after each cell, or drop the /INTERVAL"
        )


def gpu_target(device: DeviceInfo, label: str) -> str:
    """What ``nvidia-smi -i`` names the device by: its UUID, else the CUDA index."""
    nvidia = device.backend == "cuda" or "nvidia" in f"{device.platform} {device.name}".lower()
    if not (device.is_gpu and nvidia):
        raise UserError(
            f"{label} sets an NVIDIA GPU's time-slice interval; the device {device.spec or '?'} "
            f"({device.name or device.backend}) is not one: drop the /INTERVAL or use --device cuda"
        )
    if device.uuid.startswith("GPU-"):
        return device.uuid
    if re.fullmatch(r"cuda:\d+", device.spec):
        return device.spec.split(":")[1]
    raise UserError(f"{label}: cannot tell which NVIDIA GPU {device.spec!r} is (no UUID); use --device cuda:N")


def _smi(args: list[str], what: str) -> str:
    exe = shutil.which(NVIDIA_SMI)
    if exe is None:
        raise UserError(
            f"{what}: {NVIDIA_SMI} not found on PATH; the time-slice interval needs the NVIDIA driver's nvidia-smi"
        )
    try:
        done = subprocess.run([exe, *args], capture_output=True, text=True, timeout=60, check=False)
    except subprocess.TimeoutExpired:
        raise UserError(f"{what}: {NVIDIA_SMI} {' '.join(args)} did not answer in 60 s") from None
    if done.returncode != 0:
        raise UserError(
            f"{what}: {NVIDIA_SMI} {' '.join(args)} failed (status {done.returncode}): "
            f"{one_line(done.stderr or done.stdout, 300)}"
        )
    return done.stdout


def read_interval(target: str) -> str:
    """The GPU's time-slice interval now (one of INTERVALS), from ``nvidia-smi compute-policy -l``."""
    out = _smi(["compute-policy", "-l", "-i", target], f"reading GPU {target}'s time-slice interval")
    found = re.findall(r"\b(default|short|medium|long)\b", out.lower())
    if not found:
        raise UserError(
            f"GPU {target}: no time-slice interval in `{NVIDIA_SMI} compute-policy -l` "
            f"({one_line(out, 200)!r}); not changing what could not be put back"
        )
    return found[-1]


def set_interval(target: str, interval: str) -> None:
    _smi(
        ["compute-policy", "-i", target, f"--set-timeslice={INTERVAL_CODES[interval]}"],
        f"setting GPU {target}'s time-slice interval to {interval}",
    )


@contextlib.contextmanager
def gpu_timeslice(
    device: DeviceInfo, mode: Mode, *, allowed: bool, say: Callable[[str], None] | None = None
) -> Iterator[str | None]:
    """Run the body with the GPU's time-slice interval at ``mode.interval``; yields the previous
    value (None: the mode names no interval, nothing is touched)."""
    if mode.interval is None:
        yield None
        return
    check_allowed([mode], allowed)
    target = gpu_target(device, mode.label)
    before = read_interval(target)
    changed = before != mode.interval
    if changed:
        set_interval(target, mode.interval)
        if say:
            say(f"GPU {target}: time-slice interval {before} -> {mode.interval} for {mode.label}")
    try:
        yield before
    finally:
        if changed:
            held = {signal.SIGINT, signal.SIGTERM}
            old = signal.pthread_sigmask(signal.SIG_BLOCK, held)
            try:
                set_interval(target, before)
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, old)
            if say:
                say(f"GPU {target}: time-slice interval back to {before}")
