"""The ResourceClaims of a cell under Dynamic Resource Allocation (the ``dra`` placement).

A cell of ``timeslice:N[/INTERVAL]``, ``mps:N[@PCT]`` or ``exclusive`` gets ONE claim that all its
replica pods reference, so they share one GPU whose sharing the DRA driver sets from the claim's
GpuConfig (``sharebench.manifests.dra``); a ``mig:LAYOUT`` cell gets one claim per pod, each for a
MIG device of the layout's profile. Nothing on the node changes: no label, no ConfigMap.

The claims carry the label ``sharebench.io/cell=<cell>`` and are deleted when the cell ends, on
failure and on Ctrl-C too (:func:`cell_claims`). The API is ``resource.k8s.io/v1`` (GA in
Kubernetes 1.34), reached through the official client's generic ``CustomObjectsApi`` (the
client release here predates a typed ``ResourceV1Api``).

A pod uses a claim through ``spec.resourceClaims`` and its container's ``resources.claims``
(:func:`pod_patch`); Kubeflow Pipelines' kfp-kubernetes 2.17 cannot set either, see
docs/readme/dra.md for how the pipeline's pods get them.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import signal
import time
from collections.abc import Callable, Iterator
from typing import Any

import urllib3
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from sharebench.errors import UserError
from sharebench.manifests import dra
from sharebench.manifests.names import PART_OF_LABEL, RUN_NAMESPACE
from sharebench.modes import Mode, parse_mode
from sharebench.node.client import make_api_client

GROUP, VERSION, PLURAL = "resource.k8s.io", "v1", "resourceclaims"
CELL_LABEL = "sharebench.io/cell"

Progress = Callable[[str], None]


class ClaimError(UserError):
    """A claim could not be created, read or deleted: one line naming the claim and the cause."""


class ClaimNotFound(ClaimError):
    """The API server answered 404."""


class ClaimExists(ClaimError):
    """The API server answered 409 to a create."""


def _message(exc: ApiException) -> str:
    try:
        return " ".join(str(json.loads(exc.body).get("message", "")).split()) or str(exc.reason)
    except (TypeError, ValueError, AttributeError):
        return str(exc.reason)


def _call(verb: str, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    try:
        return fn(*args, **kwargs)
    except ApiException as exc:
        if exc.status in (404, 409):
            cls = ClaimNotFound if exc.status == 404 else ClaimExists
            raise cls(f"{verb} {what}: HTTP {exc.status}: {_message(exc)}") from None
        if exc.status == 403:
            raise ClaimError(
                f"permission denied: cannot {verb} {what} (RBAC: grant {verb!r} on "
                f"resource.k8s.io resourceclaims; see manifests/dra/)"
            ) from None
        raise ClaimError(f"{verb} {what} failed: HTTP {exc.status} {exc.reason}: {_message(exc)}") from None
    except urllib3.exceptions.HTTPError as exc:
        raise ClaimError(f"{verb} {what}: cannot reach the Kubernetes API ({type(exc).__name__})") from None


def cell_label(cell_id: str) -> str:
    """A label value (<= 63 characters of [a-z0-9.-_]) for a cell id such as ``timeslice:2/long_p1000_r1``."""
    slug = re.sub(r"[^a-z0-9._-]+", "-", cell_id.lower()).strip("-._")
    if len(slug) > 63:
        slug = slug[:54].rstrip("-._") + "-" + hashlib.sha1(cell_id.encode()).hexdigest()[:8]
    return slug or "cell"


def claim_names(mode: Mode | str, cell_id: str, pods: int) -> list[str]:
    """The claims of a cell: one shared by its pods, or one per pod for MIG (DNS-1123 names)."""
    m = parse_mode(mode) if isinstance(mode, str) else mode
    digest = hashlib.sha1(cell_id.encode()).hexdigest()[:10]
    base = f"sharebench-{digest}"
    return [f"{base}-{i}" for i in range(pods)] if m.spec.device_instances else [base]


def pod_patch(names: list[str], container: str = "main") -> dict[str, Any]:
    """The pod-spec patch that makes a pod use the claim(s) ``names`` (the ``i``-th pod of a MIG cell
    takes ``names[i]``; give it that one name)."""
    refs = [{"name": f"gpu-{i}", "resourceClaimName": n} for i, n in enumerate(names)]
    return {
        "spec": {
            "resourceClaims": refs,
            "containers": [{"name": container, "resources": {"claims": [{"name": r["name"]} for r in refs]}}],
        }
    }


def create_claims(
    mode: Mode | str,
    cell_id: str,
    *,
    pods: int = 1,
    namespace: str = RUN_NAMESPACE,
    gpu_model: str = "",
    api_client: Any = None,
    progress: Progress | None = None,
) -> list[str]:
    """Create the cell's claim(s); return their names. A claim left over by an interrupted earlier
    run of the same cell is replaced."""
    m = parse_mode(mode) if isinstance(mode, str) else mode
    api = k8s.CustomObjectsApi(api_client if api_client is not None else make_api_client())
    names = claim_names(m, cell_id, pods)
    created: list[str] = []
    try:
        for name in names:
            body = dra.claim(m, name, namespace, gpu_model, labels={CELL_LABEL: cell_label(cell_id)})
            what = f"ResourceClaim {namespace}/{name}"
            try:
                _call("create", what, api.create_namespaced_custom_object, GROUP, VERSION, namespace, PLURAL, body)
            except ClaimExists:
                _delete(api, namespace, name)
                _call("create", what, api.create_namespaced_custom_object, GROUP, VERSION, namespace, PLURAL, body)
            created.append(name)
            if progress:
                progress(f"{cell_id}: created {what} ({m.label})")
    except BaseException:
        for name in created:
            with contextlib.suppress(ClaimError):
                _delete(api, namespace, name)
        raise
    return names


def _delete(api: k8s.CustomObjectsApi, namespace: str, name: str) -> bool:
    """Delete one claim; False when it was already gone."""
    try:
        _call(
            "delete",
            f"ResourceClaim {namespace}/{name}",
            api.delete_namespaced_custom_object,
            GROUP,
            VERSION,
            namespace,
            PLURAL,
            name,
        )
    except ClaimNotFound:
        return False
    return True


def delete_claims(
    cell_id: str | None,
    *,
    namespace: str = RUN_NAMESPACE,
    api_client: Any = None,
    timeout_s: float = 60.0,
    poll_s: float = 0.5,
    progress: Progress | None = None,
) -> list[str]:
    """Delete every claim of the cell (by its label; ``cell_id`` None: every sharebench claim in the
    namespace, what a sweep's exit step leaves nothing behind with) and wait until they are gone;
    idempotent."""
    api = k8s.CustomObjectsApi(api_client if api_client is not None else make_api_client())
    selector = f"{CELL_LABEL}={cell_label(cell_id)}" if cell_id is not None else "=".join(PART_OF_LABEL)
    cell_id = cell_id if cell_id is not None else f"claims {selector}"

    def names() -> list[str]:
        found = _call(
            "list",
            f"ResourceClaims {selector} in {namespace}",
            api.list_namespaced_custom_object,
            GROUP,
            VERSION,
            namespace,
            PLURAL,
            label_selector=selector,
        )
        return [o["metadata"]["name"] for o in found.get("items", [])]

    gone = [n for n in names() if _delete(api, namespace, n)]
    deadline = time.monotonic() + timeout_s
    while left := names():
        if time.monotonic() > deadline:
            raise ClaimError(
                f"ResourceClaims {', '.join(left)} in {namespace} still exist {timeout_s:g} s after "
                "their deletion (a finalizer of the DRA driver or a pod still holding them?)"
            )
        time.sleep(poll_s)
    if progress and gone:
        progress(f"{cell_id}: deleted ResourceClaim(s) {', '.join(gone)}")
    return gone


def read_claim(name: str, *, namespace: str = RUN_NAMESPACE, api_client: Any = None) -> dict[str, Any]:
    api = k8s.CustomObjectsApi(api_client if api_client is not None else make_api_client())
    return _call(
        "get",
        f"ResourceClaim {namespace}/{name}",
        api.get_namespaced_custom_object,
        GROUP,
        VERSION,
        namespace,
        PLURAL,
        name,
    )


@contextlib.contextmanager
def cell_claims(
    mode: Mode | str,
    cell_id: str,
    *,
    pods: int = 1,
    namespace: str = RUN_NAMESPACE,
    gpu_model: str = "",
    api_client: Any = None,
    progress: Progress | None = None,
) -> Iterator[list[str]]:
    """The cell's claims for the body; deleted afterwards whatever happens (SIGINT/SIGTERM are held
    back while they are deleted, then delivered)."""
    client = api_client if api_client is not None else make_api_client()
    names = create_claims(
        mode, cell_id, pods=pods, namespace=namespace, gpu_model=gpu_model, api_client=client, progress=progress
    )
    try:
        yield names
    finally:
        held = {signal.SIGINT, signal.SIGTERM}
        old = signal.pthread_sigmask(signal.SIG_BLOCK, held)
        try:
            delete_claims(cell_id, namespace=namespace, api_client=client, progress=progress)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)
