# The one image every sharebench KFP component runs in (see components/image.py for its name).
#
#   docker build -t ghcr.io/sharebench/sharebench:0.1.0 .                       # CUDA 13 (driver R580+)
#   docker build -t ghcr.io/sharebench/sharebench:0.1.0-cuda12 \
#       --build-arg CUDA_MAJOR=12 --build-arg CUDA_IMAGE=nvidia/cuda:12.8.1-runtime-ubuntu24.04 .  # R535-R570
#   docker push ghcr.io/sharebench/sharebench:0.1.0
#
# CUDA runtime + Python + sharebench with the same extras the test suite installs
# (`.[test]`, which pulls kfp, kfp-kubernetes and PoCL) plus CuPy for the CUDA major version
# (extra cuda12 or cuda13); pyopencl sees the NVIDIA GPU through the NVIDIA OpenCL ICD registered
# below, and the CPU through PoCL. Runs as a non-root user. CI builds this same file on a Debian
# bookworm base made locally (.ci/image): no CUDA base can be pulled there.
ARG CUDA_IMAGE=nvidia/cuda:13.0.2-runtime-ubuntu24.04
FROM ${CUDA_IMAGE} AS system

ENV DEBIAN_FRONTEND=noninteractive \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/sharebench/venv \
    PATH=/opt/sharebench/venv/bin:$PATH \
    SHAREBENCH_CACHE=/opt/sharebench/cache \
    POCL_CACHE_DIR=/opt/sharebench/cache/pocl \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility

# Python, the OpenCL ICD loader; the NVIDIA container toolkit mounts libnvidia-opencl.so.1
# (capability "compute"), and this file registers it with the loader.
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv python3-dev ocl-icd-libopencl1 \
        pocl-opencl-icd gcc libc6-dev ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /etc/OpenCL/vendors \
 && echo "libnvidia-opencl.so.1" > /etc/OpenCL/vendors/nvidia.icd

# The package set of the tests (`pip install -e '.[test]'` in the Makefile), from pyproject.toml,
# plus the CUDA extra; no separate requirement list to drift. Dependencies first, in a layer of
# their own, so that a source change rebuilds in seconds instead of downloading them again: a
# stage of its own reads them from pyproject.toml (docker/requirements.py), and the install layer
# depends on that list alone, so a pyproject.toml edit that leaves the list as it was (another
# extra, a tool's settings) keeps the layer too.
FROM system AS requirements
ARG CUDA_MAJOR=13
COPY pyproject.toml docker/requirements.py /tmp/requirements/
RUN python3 /tmp/requirements/requirements.py /tmp/requirements/pyproject.toml "test,cuda${CUDA_MAJOR}" \
        > /tmp/requirements.txt

FROM system
ARG CUDA_MAJOR=13
WORKDIR /opt/sharebench/src
COPY --from=requirements /tmp/requirements.txt /tmp/requirements.txt
RUN python3 -m venv "$VIRTUAL_ENV" \
 && pip install --upgrade pip \
 && pip install -r /tmp/requirements.txt \
 && rm /tmp/requirements.txt
COPY pyproject.toml setup.py README.md LICENSE ./
COPY src ./src
COPY components ./components
COPY pipelines ./pipelines
# the recorded campaigns' results (.dockerignore keeps their CSV and JSON files): a pipeline's budget on a
# node plans from them (sharebench.sweep.budget.RECORDED_ROOT)
COPY results /opt/sharebench/results
ENV SHAREBENCH_RECORDED=/opt/sharebench/results
RUN pip install --no-deps ".[test,cuda${CUDA_MAJOR}]"

# Non-root user; the kernel caches (sharebench's compiled CPU kernels, PoCL's OpenCL binaries)
# are filled at build time by a tiny run on each CPU path and stay writable for the user.
RUN useradd --create-home --uid 1000 --user-group sharebench \
 && mkdir -p "$SHAREBENCH_CACHE" "$POCL_CACHE_DIR" \
 && chown -R sharebench:sharebench /opt/sharebench/cache
USER 1000:1000
WORKDIR /home/sharebench
RUN sharebench track --device cpu --particles 64 --turns 1 \
 && sharebench track --device opencl --particles 64 --turns 1

CMD ["sharebench", "--help"]
