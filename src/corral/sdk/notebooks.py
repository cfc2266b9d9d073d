"""Notebooks through the API (`/v1/{project_id}/notebooks`), for the CLI and scripts.

    nb = notebooks.Notebooks(api).create({"name": "explore", "flavor": "corral.cpu.1u"})
"""

from __future__ import annotations

from typing import Any

from corral.sdk import client


class Notebooks:
    """The notebooks of a client's project."""

    def __init__(self, api: client.Client) -> None:
        self.api = api

    def _path(self, rest: str = "") -> str:
        return f"/v1/{self.api.project_id}/notebooks{rest}"

    def _call(self, method: str, rest: str = "", **kwargs: Any) -> Any:
        return self.api._request(method, self._path(rest), **kwargs)

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        return dict(self._call("POST", json=body))

    def list(self, *, name: str | None = None, status: str | None = None,
             limit: int = 100) -> dict[str, Any]:
        params = {k: v for k, v in {"name": name, "status": status, "limit": limit}.items()
                  if v is not None}
        return dict(self._call("GET", params=params))

    def get(self, notebook_id: str) -> dict[str, Any]:
        return dict(self._call("GET", f"/{notebook_id}"))

    def start(self, notebook_id: str, *, duration_ms: int | None = None,
              lease_type: str | None = None) -> dict[str, Any]:
        params = {k: v for k, v in {"duration": duration_ms, "type": lease_type}.items()
                  if v is not None}
        return dict(self._call("POST", f"/{notebook_id}/start", params=params))

    def stop(self, notebook_id: str) -> dict[str, Any]:
        return dict(self._call("POST", f"/{notebook_id}/stop"))

    def delete(self, notebook_id: str) -> dict[str, Any]:
        return dict(self._call("DELETE", f"/{notebook_id}"))

    def lease(self, notebook_id: str) -> dict[str, Any]:
        return dict(self._call("GET", f"/{notebook_id}/lease"))

    def renew(self, notebook_id: str, duration_ms: int,
              lease_type: str = "timing") -> dict[str, Any]:
        return dict(self._call("PATCH", f"/{notebook_id}/lease",
                               json={"duration": duration_ms, "type": lease_type}))

    def events(self, notebook_id: str) -> dict[str, Any]:
        return dict(self._call("GET", f"/{notebook_id}/events"))
