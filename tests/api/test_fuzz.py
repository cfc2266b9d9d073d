"""A bounded schemathesis run against /openapi.json of a live server, authenticated.

Every operation gets generated requests (valid and invalid ones) with the admin's token,
its path's project and job pinned to real ones; no answer may be a 5xx or break the
schema. No generated job can ever run: the one core is taken by a job the run never
names, so whatever the fuzzer submits only waits in the queue.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests import conftest, factories

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    home = tmp_path_factory.mktemp("fuzz") / "home"
    live = conftest.start_live(home, cpus=1, default_flavor="tiny",
                               flavors=[{"flavor_id": "tiny", "cpu": 1, "memory_gb": 1}])
    try:
        blocker = live.submit(factories.make_job(name="blocker", command="sleep 600",
                                                    flavor_id="tiny"))
        live.wait(blocker["metadata"]["id"], {"Running"})
        target = live.submit(factories.make_job(name="target", command="true", flavor_id="tiny"))
        yield {"live": live, "job_id": target["metadata"]["id"]}
    finally:
        conftest.stop_live(live)


@pytest.fixture(scope="module")
def api_schema(fuzzed: dict[str, Any]) -> Any:
    live: conftest.Live = fuzzed["live"]
    return schemathesis.openapi.from_dict(live.http.get("/openapi.json").json())


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
@settings(max_examples=6, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
def test_no_operation_answers_5xx_or_breaks_its_schema(case: Any, fuzzed: dict[str, Any]
                                                       ) -> None:
    live: conftest.Live = fuzzed["live"]
    params = case.path_parameters or {}
    if "project_id" in params:
        params["project_id"] = live.project_id
    if "training_job_id" in params:
        params["training_job_id"] = fuzzed["job_id"]
    if "user_name" in params and params["user_name"] == live.login.user:
        params["user_name"] = "not-the-admin"
    query = case.query or {}
    if "watch" in query and _valid_wait(query.get("timeout", 30)):
        # A watch of the target (always Pending) waits its whole timeout: keep it short.
        query["timeout"] = 0.1
    case.call_and_validate(
        base_url=live.url, headers={"X-Auth-Token": live.login.token},
        checks=[not_a_server_error, response_schema_conformance, status_code_conformance,
                content_type_conformance])


def _valid_wait(timeout: Any) -> bool:
    try:
        return 0 < float(timeout) <= 60
    except (TypeError, ValueError):
        return False


def test_the_fuzzed_server_kept_its_blocker_running(fuzzed: dict[str, Any]) -> None:
    """The run above could not have run a generated job: the only core stayed taken."""
    live: conftest.Live = fuzzed["live"]
    found = live.http.post(live.path("/training-job-searches"), json={
        "limit": 50, "filters": [{"key": "phase", "operator": "in", "value": ["Running"]}]})
    assert [j["metadata"]["name"] for j in found.json()["items"]] == ["blocker"]


