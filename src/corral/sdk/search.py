"""The Python client's calls for hyperparameter searches (a training job with
`policies.auto_search`; docs/search.md).

    from corral.sdk import client, search
    api = client.Client("http://127.0.0.1:8765", token=...)
    rows = search.trials(api, job_id)          # {"total", "items": {"header", "data"}}
    search.early_stop(api, job_id, "3")

Every call raises `client.ClientError` for an error answer, as the client's own do.
"""

from __future__ import annotations

from typing import Any

from corral.sdk import client


def algorithms(api: client.Client) -> dict[str, Any]:
    return dict(api.v2("GET", "/search-algorithms"))


def trials(api: client.Client, job_id: str) -> dict[str, Any]:
    """Every trial: `items.header` names the columns, `items.data` a row a trial."""
    return dict(api.v2("GET", f"/training-jobs/{job_id}/autosearch-trials"))


def trial(api: client.Client, job_id: str, trial_id: str) -> dict[str, Any]:
    return dict(api.v2("GET", f"/training-jobs/{job_id}/autosearch-trials/{trial_id}"))


def early_stop(api: client.Client, job_id: str, trial_id: str) -> dict[str, Any]:
    return dict(api.v2("POST",
                       f"/training-jobs/{job_id}/autosearch-trial-earlystop/{trial_id}"))


def importance(api: client.Client, job_id: str) -> dict[str, Any]:
    """The searched parameters ranked by importance: `header`, `data`."""
    return dict(api.v2("GET", f"/training-jobs/{job_id}/autosearch-parameter-analysis"))
