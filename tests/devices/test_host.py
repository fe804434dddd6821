"""host_id(): one id for one host, inside and outside its containers."""

from __future__ import annotations

import hashlib
import socket
from pathlib import Path

from sharebench.devices.host import ID_SOURCES, host_id


def test_boot_id_comes_first_so_containers_on_one_kernel_agree(tmp_path):
    boot = tmp_path / "boot_id"
    boot.write_text("3f0c6f1e-0000-4000-8000-000000000001\n")
    machine = tmp_path / "machine-id"
    machine.write_text("abcdef\n")
    assert ID_SOURCES[0] == "/proc/sys/kernel/random/boot_id"
    # a host with a machine-id and its container without one: the same id (the boot id's)
    host = host_id((str(boot), str(machine)))
    container = host_id((str(boot), str(tmp_path / "absent")))
    assert host == container == "host-" + hashlib.sha1(b"3f0c6f1e-0000-4000-8000-000000000001").hexdigest()[:16]


def test_falls_back_to_machine_id_then_the_host_name(tmp_path):
    machine = tmp_path / "machine-id"
    machine.write_text("abcdef\n")
    empty = tmp_path / "empty"
    empty.write_text("\n")
    assert host_id((str(tmp_path / "absent"), str(empty), str(machine))) == host_id((str(machine),))
    assert host_id((str(machine),)) != host_id((str(tmp_path / "absent"),))
    hostname = "host-" + hashlib.sha1(socket.gethostname().encode()).hexdigest()[:16]
    assert host_id((str(tmp_path / "absent"),)) == hostname


def test_this_host_uses_its_boot_id():
    boot = Path(ID_SOURCES[0])
    if boot.exists():  # Linux
        assert host_id() == "host-" + hashlib.sha1(boot.read_text().strip().encode()).hexdigest()[:16]
    assert host_id() == host_id()
