"""A loopback HTTP server speaking the subset of the KFP v2beta1 REST API that kfp.Client uses
(experiments, runs, recurring runs, healthz): the KFP side of tests/kfp/test_submit.py and test_fetch.py."""

from __future__ import annotations

import json
import threading
import uuid
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest

API = "/apis/v2beta1"


class FakeKfp:
    """State and request log of a tiny KFP API server (experiments, runs, recurring runs, healthz)."""

    def __init__(self, token: str | None = None):
        self.token = token
        self.requests: list[tuple[str, str, dict | None, dict]] = []  # method, path, body, headers
        self.experiments: dict[str, dict] = {}
        self.runs: dict[str, dict] = {}
        self.recurring: dict[str, dict] = {}
        self.lock = threading.Lock()

    def now(self) -> str:
        return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

    def handle(self, method: str, url: str, body: dict | None, headers: dict) -> tuple[int, dict]:
        u = urlparse(url)
        q = {k: v[0] for k, v in parse_qs(u.query).items()}
        path = u.path
        with self.lock:
            self.requests.append((method, path, body, headers))
            public = (method, path) == ("GET", f"{API}/healthz")  # kfp.Client retries it 5 x 5 s otherwise
            if self.token and not public and headers.get("authorization") != f"Bearer {self.token}":
                return 401, {"code": 16, "message": "Unauthenticated: bad or missing bearer token"}
            if (method, path) == ("GET", f"{API}/healthz"):
                return 200, {"multi_user": False}
            if (method, path) == ("GET", f"{API}/experiments"):
                found = list(self.experiments.values())
                if "filter" in q:
                    want = {
                        p["key"]: p.get("string_value") or p.get("stringValue")
                        for p in json.loads(q["filter"])["predicates"]
                    }
                    found = [e for e in found if e["display_name"] == want.get("display_name", e["display_name"])]
                return 200, {"experiments": found, "total_size": len(found)} if found else {}
            if (method, path) == ("POST", f"{API}/experiments"):
                exp = dict(body, experiment_id=str(uuid.uuid4()), created_at=self.now(), storage_state="AVAILABLE")
                self.experiments[exp["experiment_id"]] = exp
                return 200, exp
            if (method, path) == ("POST", f"{API}/runs"):
                run = dict(
                    body, run_id=str(uuid.uuid4()), created_at=self.now(), state="PENDING", storage_state="AVAILABLE"
                )
                self.runs[run["run_id"]] = run
                return 200, run
            if (method, path) == ("GET", f"{API}/runs"):
                runs = [r for r in self.runs.values() if q.get("experiment_id") in (None, r.get("experiment_id"))]
                return 200, {"runs": runs, "total_size": len(runs)} if runs else {}
            if method == "GET" and path.startswith(f"{API}/runs/"):
                run = self.runs[path.rsplit("/", 1)[1]]
                run["state"] = "SUCCEEDED"  # finishes as soon as someone asks
                return 200, run
            if (method, path) == ("POST", f"{API}/recurringruns"):
                rr = dict(body, recurring_run_id=str(uuid.uuid4()), created_at=self.now(), status="ENABLED")
                self.recurring[rr["recurring_run_id"]] = rr
                return 200, rr
            if (method, path) == ("GET", f"{API}/recurringruns"):
                rrs = [r for r in self.recurring.values() if q.get("experiment_id") in (None, r.get("experiment_id"))]
                return 200, {"recurringRuns": rrs, "recurring_runs": rrs, "total_size": len(rrs)} if rrs else {}
            return 404, {"code": 5, "message": f"{method} {path} is not part of this fake"}


@pytest.fixture
def kfp_server(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.config/kfp/context.json of the user's
    for var in ("KF_PIPELINES_ENDPOINT", "KF_PIPELINES_UI_ENDPOINT"):
        monkeypatch.delenv(var, raising=False)
    state = FakeKfp()

    class Handler(BaseHTTPRequestHandler):
        def _serve(self, method):
            n = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(n)) if n else None
            code, payload = state.handle(method, self.path, body, {k.lower(): v for k, v in self.headers.items()})
            data = json.dumps(payload).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self._serve("GET")

        def do_POST(self):
            self._serve("POST")

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield state
    server.shutdown()
    server.server_close()
