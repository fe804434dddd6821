"""Fixtures of tests/kfp: the loopback KFP API (tests/support/kfp_api.py)."""

from support.kfp_api import kfp_server  # noqa: F401 (a fixture, found by pytest through this conftest)
