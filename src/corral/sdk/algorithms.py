"""The Python client's calls for algorithms (ModelArts' algorithm management).

    from corral.sdk import algorithms, client
    api = client.Client("http://127.0.0.1:8765", token=...)
    made = algorithms.create(api, {"metadata": {"name": "mlp"}, "job_config": {...}})
    algorithms.find(api, "mlp")["metadata"]["id"]

Every call raises `client.ClientError` for an error answer, as the client's own do.
"""

from __future__ import annotations

from typing import Any

from corral.sdk import client

PATH = "/algorithms"
#: the most one list call answers
PAGE = 50


def create(api: client.Client, body: dict[str, Any]) -> dict[str, Any]:
    return dict(api.v2("POST", PATH, json=body))


def page(api: client.Client, *, offset: int = 0, limit: int = PAGE,
         searches: str | None = None, sort_by: str = "create_time",
         order: str = "desc") -> dict[str, Any]:
    params: dict[str, Any] = {"offset": offset, "limit": limit, "sort_by": sort_by,
                              "order": order, **({"searches": searches} if searches else {})}
    return dict(api.v2("GET", PATH, params=params))


def get(api: client.Client, algorithm_id: str) -> dict[str, Any]:
    return dict(api.v2("GET", f"{PATH}/{algorithm_id}"))


def update(api: client.Client, algorithm_id: str, body: dict[str, Any]) -> dict[str, Any]:
    return dict(api.v2("PUT", f"{PATH}/{algorithm_id}", json=body))


def delete(api: client.Client, algorithm_id: str) -> None:
    api.v2("DELETE", f"{PATH}/{algorithm_id}")


def find(api: client.Client, ref: str) -> dict[str, Any]:
    """The project's algorithm named `ref`, else the one whose id it is."""
    offset = 0
    while True:
        found = page(api, offset=offset, searches=f"name:{ref}")
        for item in found.get("items", []):
            if item["metadata"]["name"] == ref:
                return dict(item)
        offset += PAGE
        if offset >= found.get("count", 0):
            break
    try:
        return get(api, ref)
    except client.ClientError as exc:
        if exc.status != 404:
            raise
        raise client.ClientError(404, exc.error_code,
                                 f"no algorithm named or with id '{ref}'") from None
