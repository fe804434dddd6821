"""Issue 27: a GPU UUID is spelled from its 16 bytes, never read as a C string. On one H200
(GPU-ad3a316f-400c-01e1-b1d0-88a21f6400df) CuPy's device properties gave the UUID cut at its only zero
byte (14 bytes), and `sharebench devices` printed `ad3a316f400c01e1b1d088a21f64`."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sharebench.devices import discovery, nvml

WHOLE = bytes.fromhex("ad3a316f400c01e1b1d088a21f6400df")
CUT = WHOLE.split(b"\x00")[0]  # what a C-string read of those bytes gives: 14 bytes


def test_a_uuid_with_a_zero_byte_is_spelled_whole():
    assert nvml.format_uuid(WHOLE) == "GPU-ad3a316f-400c-01e1-b1d0-88a21f6400df"
    assert nvml.format_uuid(list(WHOLE)) == "GPU-ad3a316f-400c-01e1-b1d0-88a21f6400df"


@pytest.mark.parametrize("raw", [CUT, b"", WHOLE + b"\x00", b"\x00" * 15])
def test_anything_but_sixteen_bytes_is_refused_not_misspelled(raw):
    assert nvml.format_uuid(raw) == ""


@given(st.binary(min_size=16, max_size=16))
def test_every_sixteen_bytes_round_trip(raw):
    spelled = nvml.format_uuid(raw)
    assert spelled.startswith("GPU-") and bytes.fromhex(spelled[4:].replace("-", "")) == raw


def test_cuda_uuid_prefers_the_drivers_sixteen_bytes_over_cupys_cut_string():
    props = {"pciBusID": 0x99, "pciDeviceID": 0, "uuid": CUT}
    assert discovery.cuda_uuid(0, props, driver_bytes=WHOLE) == "GPU-ad3a316f-400c-01e1-b1d0-88a21f6400df"


def test_cuda_uuid_never_returns_a_cut_one():
    # no driver answer and no NVML GPU at that PCI address (none on this machine): unknown, not wrong
    props = {"pciBusID": 0x99, "pciDeviceID": 0, "uuid": CUT}
    assert discovery.cuda_uuid(0, props, driver_bytes=b"") == ""
    props_whole = {"pciBusID": 0x99, "pciDeviceID": 0, "uuid": WHOLE}
    assert discovery.cuda_uuid(0, props_whole, driver_bytes=b"") == "GPU-ad3a316f-400c-01e1-b1d0-88a21f6400df"
