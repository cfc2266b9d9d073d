"""The Python client's calls for datasets (and their versions) and incremental-learning
jobs.

    from corral.sdk import client, incremental
    api = client.Client("http://127.0.0.1:8765", token=...)
    incremental.append(api, "stream", ["img/001.jpg", "img/002.jpg"])
    version = incremental.create_dataset_version(api, "stream", "before the review")
    incremental.act(api, "helmet", "promote", reason="checked by hand")

Every call raises `client.ClientError` for an error answer, as the client's own do.
"""

from __future__ import annotations

from typing import Any

from corral.sdk import client

LOOPS = "/incremental-learning-jobs"


def datasets(api: client.Client) -> dict[str, Any]:
    return dict(api.v2("GET", "/datasets"))


def dataset(api: client.Client, ref: str) -> dict[str, Any]:
    return dict(api.v2("GET", f"/datasets/{ref}"))


def create_dataset(api: client.Client, name: str, url: str, fmt: str | None = None,
                   description: str = "") -> dict[str, Any]:
    body = {"name": name, "url": url, "description": description,
            **({"format": fmt} if fmt else {})}
    return dict(api.v2("POST", "/datasets", json=body))


def append(api: client.Client, ref: str, samples: list[str]) -> dict[str, Any]:
    """Append samples (one line each); `{appended, number_of_samples}`."""
    return dict(api.v2("POST", f"/datasets/{ref}/samples", json={"samples": samples}))


def delete_dataset(api: client.Client, ref: str) -> None:
    api.v2("DELETE", f"/datasets/{ref}")


def create_dataset_version(api: client.Client, ref: str,
                           description: str = "") -> dict[str, Any]:
    """Freeze the samples dataset `ref` holds now as its next version; the version, whose
    `version_id` a job's input names (`remote.dataset{id, version_id}`)."""
    return dict(api.v2("POST", f"/datasets/{ref}/versions", json={"description": description}))


def dataset_versions(api: client.Client, ref: str) -> dict[str, Any]:
    """`{total, versions}`: the dataset's versions, oldest first."""
    return dict(api.v2("GET", f"/datasets/{ref}/versions"))


def dataset_version(api: client.Client, ref: str, version: str) -> dict[str, Any]:
    """A version of the dataset by its id, name (V0002) or number."""
    return dict(api.v2("GET", f"/datasets/{ref}/versions/{version}"))


def delete_dataset_version(api: client.Client, ref: str, version: str) -> None:
    """Delete a version of the dataset (by its id, name or number) and its files."""
    api.v2("DELETE", f"/datasets/{ref}/versions/{version}")


def create(api: client.Client, body: dict[str, Any]) -> dict[str, Any]:
    """A loop from Sedna's IncrementalLearningJob body."""
    return dict(api.v2("POST", LOOPS, json=body))


def loops(api: client.Client) -> dict[str, Any]:
    return dict(api.v2("GET", LOOPS))


def loop(api: client.Client, ref: str) -> dict[str, Any]:
    return dict(api.v2("GET", f"{LOOPS}/{ref}"))


def act(api: client.Client, ref: str, action: str, *, reason: str = "",
        version: int | None = None) -> dict[str, Any]:
    """trigger, stop, resume, promote (`reason`, `version`) or rollback (`reason`)."""
    body: dict[str, Any] = {"action": action, "reason": reason}
    if version is not None:
        body["version"] = version
    return dict(api.v2("POST", f"{LOOPS}/{ref}/actions", json=body))


def events(api: client.Client, ref: str, limit: int = 100) -> dict[str, Any]:
    return dict(api.v2("GET", f"{LOOPS}/{ref}/events", params={"limit": limit}))


def delete(api: client.Client, ref: str) -> None:
    api.v2("DELETE", f"{LOOPS}/{ref}")


def alias_history(api: client.Client, model: str, alias: str) -> dict[str, Any]:
    return dict(api.v2("GET", f"/models/{model}/aliases/{alias}/history"))
