"""The Kubernetes API as the node operations use it: credentials, one-line errors, one session per call.

A :class:`Session` is one operation (reconfigure, restore, status) on one node: it holds the API
client, the state named in error messages, the deadline and the progress callback. Its
:meth:`Session.call` turns ``ApiException`` and urllib3 errors into one-line :class:`NodeError`\\ s
(403: :class:`PermissionDenied` naming the RBAC verb and resource; 409: :class:`Conflict`, for a caller
that reads again), except 404, which it raises as :class:`NotFound` for the caller to name the missing object.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import urllib3
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException
from kubernetes.config import incluster_config as k8s_incluster

from sharebench.errors import UserError
from sharebench.manifests.names import NODE_TOKEN_DIR
from sharebench.parse import MIN_POLL_S as MIN_POLL_S  # re-exported: checked in parse, light
from sharebench.parse import check_times as check_times

log = logging.getLogger("sharebench.node")

POLL_S = 2.0
# every API request: (connect, read) timeout in seconds, so a frozen API server cannot hang a call
CONNECT_TIMEOUT_S = 5.0
READ_TIMEOUT_S = 10.0
# 429 and 5xx (and timeouts) are retried with exponential backoff while the deadline allows
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
BACKOFF_S = (0.2, 0.5, 1.0, 2.0, 4.0)

Progress = Callable[[str], None]


# ---------------------------------------------------------------- errors
class NodeError(UserError):
    """A reconfiguration failed: one line naming node, mode and state."""

    def __init__(self, node: str, mode: str, state: str, what: str):
        self.node, self.mode, self.state, self.what = node, mode, state, what
        super().__init__(f"node {node}, mode {mode}, state {state}: {what}")


class NodeTimeout(NodeError):
    """A wait ran past its deadline."""


class PermissionDenied(NodeError):
    """The API server answered 403: the service account lacks an RBAC verb."""


class Conflict(NodeError):
    """The API server answered 409: the object changed since it was read (a stale ``resourceVersion``) or
    a create found it already there. A caller that can read again and retry catches this type (never
    the message text); one that cannot lets it through as a one-line error."""


class _Retryable(Exception):
    """A 429, 5xx or timeout: :meth:`Session.call` tries again while the deadline allows."""

    def __init__(self, what: str):
        super().__init__(what)
        self.what = what


MAX_ATTEMPTS = 50  # an upper bound besides the deadline


class NotFound(Exception):
    """The API server answered 404; the caller turns it into a :class:`NodeError` naming the object."""


# the floor on --poll and the check of a wait's seconds (MIN_POLL_S, check_times) are sharebench.parse's: the
# command line checks them before this module, and the Kubernetes client, load


# ---------------------------------------------------------------- client
def make_api_client(kubeconfig: str | os.PathLike | None = None, context: str | None = None) -> k8s.ApiClient:
    """An API client from ``kubeconfig`` (or ``$KUBECONFIG``, ``~/.kube/config``), else in-cluster config:
    the node account's token where a pipeline's node step mounts it (``NODE_TOKEN_DIR``, or
    ``$SHAREBENCH_NODE_TOKEN_DIR``), else the pod's own service account."""
    if kubeconfig is not None:
        path = Path(kubeconfig).expanduser()
        if not path.is_file():
            raise UserError(f"kubeconfig {str(path)!r} does not exist; pass an existing file to --kubeconfig")
        cfg = k8s.Configuration()
        try:
            k8s_config.load_kube_config(
                config_file=str(path), context=context, client_configuration=cfg, persist_config=False
            )
        except (k8s_config.ConfigException, yaml.YAMLError, KeyError, TypeError) as exc:
            raise UserError(f"cannot use kubeconfig {str(path)!r}: {exc}") from exc
        return _client(cfg)
    env = os.environ.get("KUBECONFIG")
    if env:
        first = Path(env.split(os.pathsep)[0]).expanduser()
        if not first.is_file():
            raise UserError(f"KUBECONFIG={env!r} names no file; point it at a kubeconfig or unset it")
        return make_api_client(first, context)
    default = Path("~/.kube/config").expanduser()
    if default.is_file():
        return make_api_client(default, context)
    cfg = k8s.Configuration()
    node_token = Path(os.environ.get("SHAREBENCH_NODE_TOKEN_DIR") or NODE_TOKEN_DIR)
    try:
        if (node_token / "token").is_file():  # a pipeline's node step: the node account's mounted token
            loader = k8s_incluster.InClusterConfigLoader(str(node_token / "token"), str(node_token / "ca.crt"))
            loader.load_and_set(cfg)
        else:
            k8s_config.load_incluster_config(client_configuration=cfg)
    except k8s_config.ConfigException as exc:
        raise UserError(
            "no Kubernetes credentials: pass --kubeconfig, set KUBECONFIG, or run in a pod with a service account"
        ) from exc
    return _client(cfg)


def _client(cfg: k8s.Configuration) -> k8s.ApiClient:
    # no urllib3 retries underneath: Session.call retries itself, bounded by the deadline, so a
    # frozen API server costs one read timeout a try, not four
    cfg.retries = False
    return k8s.ApiClient(cfg)


# ---------------------------------------------------------------- session
class Session:
    """One operation on one node: the API, the current state for messages, progress."""

    def __init__(
        self, node: str, mode: str, api_client: Any, progress: Progress | None, timeout_s: float, poll_s: float | None
    ):
        self.node, self.mode = node, mode
        self.state = "pre-flight"
        self.changed = False  # True once the node or its ConfigMaps were changed
        self.state_key: bytes | None = None  # the prior-state signing key, once read (sharebench.node.prior)
        try:
            self.api_client = api_client if api_client is not None else make_api_client()
        except UserError as exc:
            raise self.error(str(exc)) from None
        self.core = k8s.CoreV1Api(self.api_client)
        self.progress = progress
        self.t0 = time.monotonic()
        self.timeout_s = float(timeout_s)
        self.deadline = self.t0 + self.timeout_s
        self.poll_s = POLL_S if poll_s is None else float(poll_s)

    # -- messages
    def say(self, msg: str) -> None:
        """Log ``msg`` prefixed with the node and pass it to the progress callback."""
        line = f"{self.node}: {msg}"
        log.info(line)
        if self.progress is not None:
            self.progress(line)

    def error(self, what: str, cls: type[NodeError] = NodeError) -> NodeError:
        """A ``cls`` error naming this node, mode and current state."""
        return cls(self.node, self.mode, self.state, what)

    # -- API calls with one-line errors
    def call(
        self, verb: str, resource: str, fn: Callable[..., Any], *args: Any, namespace: str | None = None, **kwargs: Any
    ) -> Any:
        """``fn(*args, **kwargs)`` with a connect and read timeout; API failures become one-line errors
        naming ``verb`` and ``resource``. 429, 5xx and timeouts are retried with backoff until the
        session's deadline (at least once more when the deadline has passed: a wait's last look)."""
        attempt = 0
        while True:
            kwargs["_request_timeout"] = (CONNECT_TIMEOUT_S, READ_TIMEOUT_S)
            try:
                return self._call_once(verb, resource, fn, args, kwargs, namespace)
            except _Retryable as exc:
                pause = BACKOFF_S[min(attempt, len(BACKOFF_S) - 1)]
                if self.remaining_s() < pause or attempt >= MAX_ATTEMPTS - 1:
                    raise self.error(f"{exc.what} (after {attempt + 1} attempt{'s' if attempt else ''})") from None
                log.info("%s: %s; retrying in %.1f s", self.node, exc.what, pause)
                time.sleep(pause)
                attempt += 1

    def _call_once(
        self, verb: str, resource: str, fn: Callable[..., Any], args: Any, kwargs: Any, namespace: str | None
    ) -> Any:
        where = f" in namespace {namespace}" if namespace else ""
        try:
            return fn(*args, **kwargs)
        except ApiException as exc:
            if exc.status == 404:
                raise NotFound(_status_message(exc)) from None
            if exc.status == 403:
                raise self.error(
                    f"permission denied: cannot {verb} {resource}{where} "
                    f"(RBAC: grant verb {verb!r} on resource {resource!r}; see manifests/rbac/)",
                    PermissionDenied,
                ) from None
            if exc.status == 401:
                raise self.error(
                    "unauthorized: the API server refused the credentials "
                    "(check the kubeconfig or service account token)"
                ) from None
            what = f"{verb} {resource}{where} failed: HTTP {exc.status} {exc.reason}: {_status_message(exc)}"
            if exc.status in RETRY_STATUSES:
                raise _Retryable(what) from None
            if exc.status == 409:
                raise self.error(what, Conflict) from None
            raise self.error(what) from None
        except urllib3.exceptions.HTTPError as exc:
            host = getattr(self.api_client.configuration, "host", "?")
            cause = exc.reason if isinstance(exc, urllib3.exceptions.MaxRetryError) else exc
            if isinstance(cause, urllib3.exceptions.NewConnectionError) or not isinstance(
                cause, (urllib3.exceptions.TimeoutError, urllib3.exceptions.ProtocolError)
            ):
                raise self.error(f"cannot reach the Kubernetes API at {host}: {type(exc).__name__}") from None
            raise _Retryable(
                f"{verb} {resource}{where}: no answer from the Kubernetes API at {host} "
                f"within {CONNECT_TIMEOUT_S:g} s (connect) / {READ_TIMEOUT_S:g} s (read): "
                f"{type(cause).__name__}"
            ) from None

    def read_node(self) -> k8s.V1Node:
        """The node; a missing one is an error that lists some existing nodes when it may."""
        try:
            return self.call("get", "nodes", self.core.read_node, self.node)
        except NotFound:
            raise self.error(f"node {self.node!r} not found{self._nodes_hint()}") from None

    def _nodes_hint(self) -> str:
        try:
            names = [n.metadata.name for n in self.core.list_node(limit=20).items]
        except Exception:  # noqa: BLE001 - the hint is optional (list may be denied)
            return ""
        return f"; nodes: {', '.join(names) or 'none'}"

    def patch_node(self, body: dict) -> k8s.V1Node:
        """Patch the node with ``body`` (a strategic merge patch); returns the patched node."""
        try:
            return self.call("patch", "nodes", self.core.patch_node, self.node, body)
        except NotFound:
            raise self.error(f"node {self.node!r} disappeared") from None

    def remaining_s(self) -> float:
        """Seconds left before the deadline (negative once past it)."""
        return self.deadline - time.monotonic()

    def elapsed_s(self) -> float:
        """Seconds since the session started."""
        return time.monotonic() - self.t0


def _status_message(exc: ApiException) -> str:
    try:
        return " ".join(str(json.loads(exc.body).get("message", "")).split()) or str(exc.reason)
    except (TypeError, ValueError, AttributeError):
        return str(exc.reason)
