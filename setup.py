"""The package list, found rather than kept by hand (metadata, dependencies and package-dir: pyproject.toml).

Every package under src/ is found, so a new subpackage cannot be missing from the image; components/
and pipelines/ install as sharebench.components and sharebench.pipelines (package-dir in pyproject.toml).
"""

from setuptools import find_packages, setup

setup(
    packages=[
        *find_packages("src", include=["sharebench", "sharebench.*"]),
        "sharebench.components",
        "sharebench.pipelines",
    ]
)
