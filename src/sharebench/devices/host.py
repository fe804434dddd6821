"""This host: its CPU model, a stable id, the cores this process may use, its load."""

from __future__ import annotations

import hashlib
import os
import platform
import socket


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (Linux), else what ``platform`` says, else ``cpu``."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


# Where host_id() reads its seed, first found first. The kernel's boot id comes first: it is the same
# in every container on one kernel (a container image often has no /etc/machine-id, and its host name
# is the container's), so two replicas in two containers on one CPU are one device; it changes at a
# reboot, which no sweep spans.
ID_SOURCES = ("/proc/sys/kernel/random/boot_id", "/etc/machine-id", "/var/lib/dbus/machine-id")


def host_id(sources: tuple[str, ...] = ID_SOURCES) -> str:
    """An id of this host, the same inside and outside its containers (boot id, else machine-id,
    else the host name)."""
    seed = ""
    for path in sources:
        try:
            with open(path) as fh:
                seed = fh.read().strip()
        except OSError:
            continue
        if seed:
            break
    seed = seed or socket.gethostname()
    return "host-" + hashlib.sha1(seed.encode()).hexdigest()[:16]


def usable_cpus() -> list[int]:
    """The cores this process may run on (its affinity mask)."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def load_average() -> tuple[float, float, float] | None:
    """The 1, 5 and 15 minute load averages, where the OS reports them."""
    return os.getloadavg() if hasattr(os, "getloadavg") else None
