"""A job's input that names a dataset version (`remote.dataset{id, version_id}`): the body's
rules, where its data is before and after it is pinned, and which algorithm channels take
one. No server: the store's and the API's tests are in tests/integration and tests/api."""

from __future__ import annotations

import re
from typing import Any

import pydantic
import pytest

from corral.domain import algorithms, errors, specs
from corral.services import dataset_versions


def channel(remote: dict[str, Any]) -> specs.Input:
    return specs.Input.model_validate({"name": "data", "remote": remote})


def test_an_input_reads_a_path_or_a_dataset_version() -> None:
    path = channel({"obs": {"obs_url": "/data"}})
    assert (path.url, path.dataset) == ("/data", None)
    version = channel({"dataset": {"id": "stream", "version_id": "V0002"}})
    assert version.dataset is not None and version.url == ""  # not pinned yet
    version.dataset.obs_url = "/home/corral/datasets/p/d/v"
    assert version.url == "/home/corral/datasets/p/d/v"


@pytest.mark.parametrize(("remote", "words"), [
    ({"dataset": {"version_id": "V0001"}}, "remote.dataset.id is missing"),
    ({"dataset": {"id": "stream"}}, "remote.dataset.version_id is missing"),
    ({"dataset": {"id": "stream", "version_id": ""}}, "at least 1 character"),
    ({}, "one of the two"),
    ({"obs": {"obs_url": "/data"}, "dataset": {"id": "s", "version_id": "V0001"}},
     "one of the two"),
])
def test_an_input_without_its_data_or_with_two_is_refused(remote: dict[str, Any],
                                                          words: str) -> None:
    with pytest.raises(pydantic.ValidationError, match=words):
        channel(remote)


def _algorithm(data_types: list[str]) -> algorithms.AlgorithmBody:
    constraints = [{"data_type": t} for t in data_types]
    return algorithms.AlgorithmBody.model_validate({"metadata": {"name": "algo"}, "job_config": {
        "command": "true", "inputs": [{"name": "data", "remote_constraints": constraints}]}})


def _job(remote: dict[str, Any]) -> specs.Algorithm:
    return specs.Algorithm.model_validate({"id": "a1", "inputs": [{"name": "data",
                                                                   "remote": remote}]})


PATH = {"obs": {"obs_url": "/data"}}
VERSION = {"dataset": {"id": "stream", "version_id": "V0001"}}


@pytest.mark.parametrize(("data_types", "remote", "refused"), [
    ([], PATH, None),
    ([], VERSION, None),
    (["dataset", "obs"], VERSION, None),
    (["dataset"], VERSION, None),
    (["dataset"], PATH, "takes dataset versions (remote.dataset) only, and the job gives a "
                        "path or URL"),
    (["obs"], VERSION, "takes paths or URLs (remote.obs) only, and the job gives a dataset "
                       "version"),
])
def test_an_algorithms_channel_takes_what_its_constraints_name(
        data_types: list[str], remote: dict[str, Any], refused: str | None) -> None:
    if refused is None:
        made = algorithms.apply("a1", _algorithm(data_types), _job(remote))
        assert made.inputs[0].remote == specs.InputRemote.model_validate(remote)
        return
    with pytest.raises(errors.BadParameter, match=re.escape(refused)):
        algorithms.apply("a1", _algorithm(data_types), _job(remote))


def test_a_versions_content_hash_is_of_its_files_in_any_order() -> None:
    a = {"path": "a", "size": 1, "sha256": "00"}
    b = {"path": "b", "size": 2, "sha256": "11"}
    assert dataset_versions.content_hash([a, b]) == dataset_versions.content_hash([b, a])
    assert dataset_versions.content_hash([a]) != dataset_versions.content_hash([a, b])
    assert dataset_versions.content_hash([a]) != dataset_versions.content_hash(
        [{**a, "size": 3}])
