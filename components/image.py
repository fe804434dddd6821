"""The one place that names the project image every component runs in.

Override at compile time with ``SHAREBENCH_IMAGE`` (``SHAREBENCH_IMAGE=reg/sharebench:dev
sharebench compile``); a single run can also override it through the pipelines'
``image`` parameter.
"""

from __future__ import annotations

import os

from sharebench import __version__

IMAGE_NAME = "ghcr.io/sharebench/sharebench"
IMAGE_TAG = __version__
IMAGE = os.environ.get("SHAREBENCH_IMAGE") or f"{IMAGE_NAME}:{IMAGE_TAG}"
