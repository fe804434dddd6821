"""Grafana annotations: each benchmark cell's tracking window as a region on the dashboard
(``manifests/monitoring/``), tagged ``sharebench`` and the cell's mode."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from sharebench.errors import UserError

ANNOTATION_TAG = "sharebench"


def annotation_payloads(cells: list[dict[str, Any]], run: str | None = None) -> list[dict[str, Any]]:
    """Grafana ``POST /api/annotations`` bodies, one region per cell
    (``{"cell_id", "mode", "start", "end"}`` in epoch seconds)."""
    out = []
    for c in cells:
        start, end = float(c["start"]), float(c["end"])
        if not end >= start:
            raise UserError(f"cell {c.get('cell_id')!r} ends before it starts ({start} > {end})")
        tags = [ANNOTATION_TAG, str(c.get("mode", ""))] + ([f"run:{run}"] if run else [])
        out.append(
            {
                "time": int(round(start * 1000)),
                "timeEnd": int(round(end * 1000)),
                "tags": [t for t in tags if t],
                "text": f"sharebench {c.get('mode', '')} {c.get('cell_id', '')}".strip(),
            }
        )
    return out


def post_annotations(
    grafana_url: str, token: str | None, cells: list[dict[str, Any]], run: str | None = None, timeout_s: float = 10.0
) -> list[int]:
    """Write the cells' annotations to Grafana (service-account token); their ids."""
    ids = []
    for body in annotation_payloads(cells, run):
        req = urllib.request.Request(
            grafana_url.rstrip("/") + "/api/annotations",
            method="POST",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})},
        )
        try:
            with urllib.request.urlopen(req, timeout=timeout_s) as resp:
                ids.append(int(json.loads(resp.read().decode()).get("id", 0)))
        except urllib.error.HTTPError as exc:
            raise UserError(
                f"Grafana at {grafana_url} refused the annotation ({exc.code} {exc.reason}); "
                "check the token's Editor role"
            ) from exc
        except (urllib.error.URLError, OSError) as exc:
            raise UserError(f"Grafana at {grafana_url} not reachable: {getattr(exc, 'reason', exc)}") from exc
    return ids
