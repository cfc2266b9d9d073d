"""The official Huawei Cloud ModelArts Python SDK, unchanged, against a live corral server.

Every call goes through the SDK's own client (endpoint override, AK/SK signing, its
response models). Besides what each test asserts, `Sdk.call` checks the raw JSON corral
sent against the SDK model's declared field types, so that an answer the SDK would
quietly coerce (`1.0` into an int field) or drop (a map where it wants a list) fails
here instead of surprising a user.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from huaweicloudsdkcore.auth import credentials
from huaweicloudsdkcore.exceptions import exceptions as sdk_errors
from huaweicloudsdkcore.http import http_handler
from huaweicloudsdkmodelarts.v1 import model as ma
from huaweicloudsdkmodelarts.v1 import modelarts_client

from corral.api import views
from corral.domain import resources
from tests import conftest, factories

# Any coercion the SDK has to make while reading corral's answers is an error here.
pytestmark = pytest.mark.filterwarnings("error::huaweicloudsdkcore.warning.warning.SdkWarning")

ACTIVE = ["Creating", "Pending", "Running", "Terminating"]
TRAIN = """\
import os, sys, time
print("args", *sys.argv[1:], flush=True)
print("GREETING=" + os.environ.get("GREETING", ""), flush=True)
time.sleep(60)
"""


# --- the SDK client and a strict reading of its answers ----------------------------------


def mismatches(value: Any, kind: str, where: str = "$") -> list[str]:
    """Where `value` (parsed JSON) does not have the SDK type `kind`; None is always fine."""
    if value is None:
        return []
    if kind.startswith("list["):
        if not isinstance(value, list):
            return [f"{where}: {kind} wanted, got {value!r}"]
        return [m for i, v in enumerate(value) for m in mismatches(v, kind[5:-1], f"{where}[{i}]")]
    if kind.startswith("dict("):
        inner = re.fullmatch(r"dict\(([^,]*), (.*)\)", kind)
        assert inner is not None, kind
        if not isinstance(value, dict):
            return [f"{where}: {kind} wanted, got {value!r}"]
        return [m for k, v in value.items() for m in mismatches(v, inner[2], f"{where}.{k}")]
    checks: dict[str, Callable[[Any], bool]] = {
        "str": lambda v: isinstance(v, str),
        "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "float": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
        "bool": lambda v: isinstance(v, bool),
        "object": lambda v: True,
    }
    if kind in checks:
        return [] if checks[kind](value) else [f"{where}: {kind} wanted, got {value!r}"]
    klass = getattr(ma, kind)
    if not isinstance(value, dict):
        return [f"{where}: {kind} object wanted, got {value!r}"]
    return [
        m
        for attr, sub in klass.openapi_types.items()
        for m in mismatches(
            value.get(klass.attribute_map[attr]), sub, f"{where}.{klass.attribute_map[attr]}"
        )
    ]


@dataclasses.dataclass
class Sdk:
    """The SDK's client, with the headers of every request it sent."""

    client: modelarts_client.ModelArtsClient
    sent: list[dict[str, str]] = dataclasses.field(default_factory=list)

    def call(self, method: str, request: Any) -> Any:
        """`client.<method>(request)`; fails if corral's answer mistypes a field."""
        resp = getattr(self.client, method)(request)
        raw = json.loads(resp.raw_content) if resp.raw_content else {}
        assert mismatches(raw, type(resp).__name__) == []
        return resp

    def job(self, job_id: str) -> Any:
        return self.call(
            "show_training_job_details", ma.ShowTrainingJobDetailsRequest(training_job_id=job_id)
        )

    def wait(self, job_id: str, phases: set[str], timeout: float = 30.0) -> Any:
        return poll(
            lambda: (j := self.job(job_id)).status.phase in phases and j,
            timeout,
            f"job {job_id} reaches {phases}",
        )

    def terminate(self, job_id: str) -> Any:
        return self.call(
            "stop_training_job",
            ma.StopTrainingJobRequest(
                training_job_id=job_id, body=ma.JobActionType(action_type="terminate")
            ),
        )

    def search(self, **body: Any) -> Any:
        return self.call(
            "list_training_jobs", ma.ListTrainingJobsRequest(body=ma.JobSearches(**body))
        )


def poll(check: Callable[[], Any], timeout: float = 30.0, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while not (value := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout}s: {what}")
        time.sleep(0.05)
    return value


def connect(live: conftest.Live, ak: str | None = None, sk: str | None = None,
            project_id: str | None = None) -> Sdk:
    """The SDK with a key pair (default: the one the server made for its admin)."""
    ak = ak or live.login.access_key
    sk = sk or live.login.secret_key
    sdk: Sdk
    handler = http_handler.HttpHandler().add_request_handler(
        lambda **kw: sdk.sent.append(dict(kw["request"].header_params))
    )
    client = (
        modelarts_client.ModelArtsClient.new_builder()
        .with_credentials(credentials.BasicCredentials(ak, sk, project_id or live.project_id))
        .with_endpoints([live.url])
        .with_http_handler(handler)
        .build()
    )
    sdk = Sdk(client)
    return sdk


@pytest.fixture
def sdk(live_server: conftest.Live) -> Iterator[Sdk]:
    s = connect(live_server)
    yield s
    active = live_server.http.post(
        live_server.path("/training-job-searches"),
        json={"limit": 50, "filters": [{"key": "phase", "operator": "in", "value": ACTIVE}]},
    ).json()
    for job in active["items"]:
        live_server.http.post(
            live_server.path(f"/training-jobs/{job['metadata']['id']}/actions"),
            json={"action_type": "terminate"},
        )
    for job in active["items"]:
        live_server.wait(job["metadata"]["id"])
    s.client.get_http_client().close()


def sdk_job(
    name: str,
    *,
    code_dir: pathlib.Path | None = None,
    command: str | None = None,
    retries: int | None = None,
    environments: dict[str, str] | None = None,
    parameters: list[Any] | None = None,
    inputs: list[Any] | None = None,
    outputs: list[Any] | None = None,
    flavor_id: str = "corral.cpu.1u",
    node_count: int = 1,
) -> Any:
    """A create body built from the SDK's own request models."""
    annotations = {"team": "vision"}
    if retries is not None:
        annotations["fault-tolerance/job-retry-num"] = str(retries)
    return ma.Job(
        kind="job",
        metadata=ma.JobMetadata(name=name, description="made by the SDK", annotations=annotations),
        algorithm=ma.JobAlgorithm(
            code_dir=None if code_dir is None else str(code_dir),
            boot_file=None if code_dir is None else "train.py",
            command=command,
            parameters=parameters,
            inputs=inputs,
            outputs=outputs,
            environments=environments,
        ),
        spec=ma.Spec(resource=ma.SpecResource(flavor_id=flavor_id, node_count=node_count)),
    )


def create(sdk: Sdk, body: Any) -> Any:
    return sdk.call("create_training_job", ma.CreateTrainingJobRequest(body=body))


# --- a whole life cycle --------------------------------------------------------------------


def test_sdk_runs_a_training_job_through_its_life_cycle(
    sdk: Sdk, live_server: conftest.Live, tmp_path: pathlib.Path
) -> None:
    code = factories.write_code(tmp_path, TRAIN)
    data, out = tmp_path / "data", tmp_path / "out"
    data.mkdir()
    body = sdk_job(
        "sdk-life",
        code_dir=code,
        environments={"GREETING": "hello"},
        parameters=[
            ma.Parameters(name="lr", value="0.01"),
            ma.Parameters(name="epochs", value="3"),
        ],
        inputs=[
            ma.Input(
                name="data_url", remote=ma.InputDataInfo(obs=ma.InputDataInfoObs(obs_url=str(data)))
            )
        ],
        outputs=[ma.Output(name="train_url", remote=ma.Remote(obs=ma.RemoteObs(obs_url=str(out))))],
    )

    created = create(sdk, body)

    assert created.status_code == 201
    job_id = created.metadata.id
    assert created.kind == "job"
    assert created.metadata.name == "sdk-life"
    assert created.metadata.annotations == {"team": "vision"}
    assert created.metadata.create_time > 0
    assert created.status.phase in {"Creating", "Pending", "Running"}
    assert created.algorithm.code_dir == str(code)
    assert created.algorithm.boot_file == "train.py"
    assert created.algorithm.environments == [{"GREETING": "hello"}]
    assert [(p.name, p.value) for p in created.algorithm.parameters] == [
        ("lr", "0.01"),
        ("epochs", "3"),
    ]
    assert created.algorithm.inputs[0].remote.obs.obs_url == str(data)
    assert created.algorithm.outputs[0].remote.obs.obs_url == str(out)
    assert created.algorithm.engine.engine_id

    shown = sdk.wait(job_id, {"Running"})
    check_running_details(shown, job_id)
    check_search(sdk, job_id)
    check_description_update(sdk, job_id)
    check_logs_and_metrics(sdk, job_id, data, out)

    stopped = sdk.terminate(job_id)

    assert stopped.status_code == 202
    assert stopped.metadata.id == job_id
    assert stopped.status.phase in {"Terminating", "Terminated"}
    ended = sdk.wait(job_id, {"Terminated"})
    assert ended.status.running_records[-1].end_at >= ended.status.running_records[-1].start_at
    check_events(sdk, job_id)

    deleted = sdk.call("delete_training_job", ma.DeleteTrainingJobRequest(training_job_id=job_id))

    assert deleted.status_code == 202
    with pytest.raises(sdk_errors.ClientRequestException) as gone:
        sdk.job(job_id)
    assert gone.value.status_code == 404
    assert gone.value.error_code == "ModelArts.2775"


def check_running_details(job: Any, job_id: str) -> None:
    assert job.metadata.id == job_id
    assert job.metadata.description == "made by the SDK"
    status = job.status
    assert (status.phase, status.secondary_phase) == ("Running", "Running")
    assert status.start_time > 0
    assert status.duration >= 0
    assert status.tasks == ["worker-0"]
    assert [t.task for t in status.task_statuses] == ["worker-0"]
    (record,) = status.running_records
    assert record.start_type == "init_or_rescheduled"
    assert record.start_at == status.start_time // 1000  # seconds, as documented
    assert status.node_count_metrics == [[status.start_time, 1]]
    resource = job.spec.resource
    assert (resource.flavor_id, resource.node_count) == ("corral.cpu.1u", 1)
    assert resource.flavor_name
    detail = resource.flavor_detail
    assert detail.flavor_type == "CPU"
    assert detail.billing.code == "corral.cpu.1u"
    assert detail.flavor_info.cpu.core_num == 1
    assert detail.flavor_info.cpu.arch
    assert detail.flavor_info.memory.size >= 1
    assert detail.flavor_info.memory.unit == "GB"


def check_search(sdk: Sdk, job_id: str) -> None:
    found = sdk.search(
        limit=10,
        sort_by="create_time",
        order="desc",
        filters=[
            ma.Filter(key="name", operator="like", value=["sdk-li"]),
            ma.Filter(key="phase", operator="in", value=["Running", "Pending"]),
        ],
    )
    assert (found.total, found.count) == (1, 1)
    assert found.items[0].metadata.id == job_id
    assert found.items[0].status.phase == "Running"
    assert found.items[0].spec.resource.flavor_detail.flavor_info.cpu.core_num == 1
    none = sdk.search(filters=[ma.Filter(key="phase", operator="in", value=["Completed"])])
    assert (none.total, none.count, none.items) == (1, 0, [])  # total: jobs in the project


def check_description_update(sdk: Sdk, job_id: str) -> None:
    changed = sdk.call(
        "change_training_job_description",
        ma.ChangeTrainingJobDescriptionRequest(
            training_job_id=job_id, body=ma.JobUpdateRequestBody(description="tuned")
        ),
    )
    assert changed.status_code == 200
    assert sdk.job(job_id).metadata.description == "tuned"
    found = sdk.search(filters=[ma.Filter(key="description", operator="like", value=["tun"])])
    assert [j.metadata.id for j in found.items] == [job_id]


def check_logs_and_metrics(sdk: Sdk, job_id: str, data: pathlib.Path, out: pathlib.Path) -> None:
    def preview() -> Any:
        return sdk.call(
            "show_training_job_logs_preview",
            ma.ShowTrainingJobLogsPreviewRequest(training_job_id=job_id, task_id="worker-0"),
        )

    log = poll(lambda: "GREETING" in (p := preview()).content and p, what="the log's lines")
    assert "--lr=0.01" in log.content
    assert "--epochs=3" in log.content
    assert f"--data_url={data}" in log.content
    assert f"--train_url={out}" in log.content
    assert "GREETING=hello" in log.content
    assert log.current_size == log.full_size == len(log.content.encode())

    def metrics() -> Any:
        return sdk.call(
            "show_training_job_metrics",
            ma.ShowTrainingJobMetricsRequest(training_job_id=job_id, task_id="worker-0"),
        )

    def sampled() -> dict[str, list[float]]:
        by_name = {m.metric: m.value for m in metrics().metrics}
        return by_name if by_name.get("memUsage") else {}

    by_name = poll(sampled, what="metrics samples")
    assert {"cpuUsage", "memUsage", "gpuUtil", "gpuMemUsage"} <= set(by_name)
    assert len({len(values) for values in by_name.values()}) == 1  # one value per sample
    assert all(isinstance(v, float) for values in by_name.values() for v in values)
    # memUsage is a percentage that rounds to 0.0 on a big machine; the MB never do.
    assert all(v > 0 for v in by_name["memUsedMB"])


def check_events(sdk: Sdk, job_id: str) -> None:
    events = sdk.call(
        "list_training_job_events", ma.ListTrainingJobEventsRequest(training_job_id=job_id)
    )
    assert events.total == len(events.events) >= 3
    messages = [e.message for e in events.events]
    assert messages[0].startswith("Job created")
    assert any("Termination requested" in m for m in messages)
    first = events.events[0]
    assert (first.level, first.source) == ("Info", "Job")
    assert int(first.time) > 0  # milliseconds, sent as a string as the SDK declares
    latest = sdk.call(
        "list_training_job_events",
        ma.ListTrainingJobEventsRequest(training_job_id=job_id, order="desc", limit=1),
    )
    assert (latest.limit, latest.order, len(latest.events)) == (1, "desc", 1)
    assert latest.events[0].time >= first.time
    only = sdk.call(
        "list_training_job_events",
        ma.ListTrainingJobEventsRequest(training_job_id=job_id, pattern="Termination"),
    )
    assert only.events and all("Termination" in e.message for e in only.events)


# --- finished jobs: exit codes and running records ----------------------------------------


def test_sdk_reads_a_retried_failure(sdk: Sdk) -> None:
    job_id = create(sdk, sdk_job("sdk-fails", command="exit 3", retries=1)).metadata.id

    job = sdk.wait(job_id, set(conftest.TERMINAL))

    assert job.status.phase == "Failed"
    assert [(t.task, t.exit_code) for t in job.status.task_statuses] == [("worker-0", 3)]
    first, second = job.status.running_records
    assert (first.start_type, second.start_type) == ("init_or_rescheduled", "restarted")
    assert first.end_reason == second.end_reason == "exit with 3"
    assert first.end_related_task == "worker-0"
    assert first.end_recover == "proc_restart"
    assert first.start_at <= first.end_at <= second.start_at <= second.end_at
    assert job.metadata.annotations["fault-tolerance/job-retry-num"] == "1"


def test_sdk_sets_the_fault_tolerance_annotations_and_corral_honours_them(sdk: Sdk) -> None:
    # Attempt 1 fails as CUDA out of memory, which is not retried unless retries are
    # unconditional; attempt 2 succeeds. The backoff is the default (5 s).
    body = sdk_job("sdk-ft", retries=1, command='if [ "$CORRAL_ATTEMPT" = 1 ]; then '
                   'echo "RuntimeError: CUDA out of memory"; exit 1; fi; echo done')
    body.metadata.annotations.update({"fault-tolerance/job-unconditional-retry": "true",
                                      "fault-tolerance/hang-retry": "true"})
    want = dict(body.metadata.annotations)

    job_id = create(sdk, body).metadata.id
    job = sdk.wait(job_id, set(conftest.TERMINAL), timeout=40)

    assert job.metadata.annotations == want
    assert job.status.phase == "Completed"
    first, second = job.status.running_records
    assert (first.end_reason, first.end_recover) == ("exit with 1", "proc_restart")
    assert second.start_type == "restarted"

    bad = sdk_job("sdk-ft-bad", command="true")
    bad.metadata.annotations["fault-tolerance/hang-retry"] = "maybe"
    with pytest.raises(sdk_errors.ClientRequestException) as err:
        create(sdk, bad)
    assert err.value.status_code == 400
    assert "fault-tolerance/hang-retry must be true or false" in err.value.error_msg


def test_sdk_reads_a_completed_two_node_job(sdk: Sdk) -> None:
    job_id = create(sdk, sdk_job("sdk-pair", command="true", node_count=2)).metadata.id

    job = sdk.wait(job_id, set(conftest.TERMINAL))

    assert job.status.phase == "Completed"
    assert job.status.tasks == ["worker-0", "worker-1"]
    assert sorted((t.task, t.exit_code) for t in job.status.task_statuses) == [
        ("worker-0", 0),
        ("worker-1", 0),
    ]
    assert job.spec.resource.node_count == 2
    assert job.status.node_count_metrics[0][1] == 2
    assert job.status.node_count_metrics[-1][1] == 0


# --- the catalog -----------------------------------------------------------------------------


def test_sdk_lists_flavors(sdk: Sdk, live_server: conftest.Live) -> None:
    listed = sdk.call("show_training_job_flavors", ma.ShowTrainingJobFlavorsRequest())

    flavors = {f.flavor_id: f for f in listed.flavors}
    assert listed.total_count == len(flavors) >= 2
    one, whole = flavors["corral.cpu.1u"], flavors["corral.cpu.full"]
    assert one.flavor_type == "CPU"
    assert one.flavor_info.cpu.core_num == 1
    assert one.flavor_info.memory.size >= 1
    assert one.flavor_info.max_num == one.max_num >= 1
    node_cpus = sum(n.cpu for n in live_server.embedded.platform.catalog.nodes)
    assert whole.flavor_info.cpu.core_num == node_cpus
    # the room for jobs on the run folders' disk (an int here, as DiskResponse declares)
    assert one.flavor_info.disk.unit == "GB"
    assert one.flavor_info.disk.size == live_server.embedded.platform.catalog.disk_gb > 0
    cpu_only = sdk.call(
        "show_training_job_flavors", ma.ShowTrainingJobFlavorsRequest(flavor_type="CPU")
    )
    assert {f.flavor_type for f in cpu_only.flavors} == {"CPU"}


def test_a_gpu_flavor_has_the_shape_the_sdk_reads() -> None:
    # This machine may have no GPU, so the rendering is checked without a server.
    gpu = resources.Flavor(
        flavor_id="corral.gpu.1",
        flavor_name="1 GPU",
        cpu=8.0,
        memory_gb=64,
        gpu=1,
        gpu_product="NVIDIA H100",
        gpu_memory="80GB",
    )

    listed = views.flavor(gpu)
    detail = views.flavor_detail(gpu)

    assert mismatches(listed, "FlavorResponseWithSupport") == []
    assert mismatches(detail, "FlavorDetail") == []
    assert listed["flavor_type"] == "GPU"
    assert listed["flavor_info"]["cpu"]["core_num"] == 8
    assert listed["flavor_info"]["gpu"] == {
        "unit_num": 1,
        "product_name": "NVIDIA H100",
        "memory": "80GB",
    }


def test_sdk_lists_engines(sdk: Sdk) -> None:
    listed = sdk.call("show_training_job_engines", ma.ShowTrainingJobEnginesRequest())

    assert listed.total == len(listed.items) >= 1
    engine = listed.items[0]
    assert engine.engine_id and engine.engine_name and engine.engine_version
    assert engine.v1_compatible is False
    assert engine.image_info.image_version == engine.engine_version


# --- errors and what goes over the wire ----------------------------------------------------


def test_sdk_raises_the_modelarts_error_for_an_unknown_job(sdk: Sdk) -> None:
    with pytest.raises(sdk_errors.ClientRequestException) as err:
        sdk.job("00000000-0000-4000-8000-000000000000")

    assert err.value.status_code == 404
    assert err.value.error_code == "ModelArts.2775"
    assert "does not exist" in err.value.error_msg


def test_sdk_raises_the_modelarts_error_for_bad_input(sdk: Sdk) -> None:
    with pytest.raises(sdk_errors.ClientRequestException) as err:
        create(sdk, sdk_job("sdk-bad", command="true", flavor_id="no.such.flavor"))

    assert err.value.status_code == 400
    assert err.value.error_code == "ModelArts.2763"
    assert sdk.search().total == 0


def test_sdk_sets_auto_stop_and_is_told_that_volumes_are_not_mounted(
    sdk: Sdk, live_server: conftest.Live
) -> None:
    body = sdk_job("sdk-auto-stop", command="true")
    body.spec.auto_stop = ma.AutoStop(time_unit="HOURS", duration=2)
    job_id = create(sdk, body).metadata.id
    job = sdk.wait(job_id, {"Completed"})
    raw = live_server.job(job_id)
    assert raw["spec"]["auto_stop"] == {"time_unit": "HOURS", "duration": 2}
    # a job's flavor_detail has the disk too, its size a string as Disk declares
    disk = job.spec.resource.flavor_detail.flavor_info.disk
    assert (disk.size, disk.unit) == (str(live_server.embedded.platform.catalog.disk_gb), "GB")

    body = sdk_job("sdk-volume", command="true")
    body.spec.volumes = [ma.SpecVolumes(nfs=ma.Nfs(nfs_server_path="10.0.0.1:/data",
                                                   local_path="/data"))]
    with pytest.raises(sdk_errors.ClientRequestException) as err:
        create(sdk, body)
    assert (err.value.status_code, err.value.error_code) == (400, "ModelArts.2788")
    assert "mounts no volumes" in err.value.error_msg
    assert sdk.search().total == 1


def test_sdk_signs_every_request_and_corral_verifies_the_key(
    sdk: Sdk, live_server: conftest.Live
) -> None:
    member = live_server.new_user("sdk-member", "member")
    theirs = connect(live_server, member.access_key, member.secret_key)
    forged = connect(live_server, member.access_key, "not-the-secret-key-at-all")
    unknown = connect(live_server, "NOSUCHACCESSKEY00000", member.secret_key)

    assert theirs.search().total == 0
    for bad in (forged, unknown):
        with pytest.raises(sdk_errors.ClientRequestException) as err:
            bad.search()
        assert err.value.status_code == 401
        assert err.value.error_code == "ModelArts.2784"
    for headers in sdk.sent + theirs.sent + forged.sent:
        assert headers["Authorization"].startswith("SDK-HMAC-SHA256 Access=")
        assert re.fullmatch(r"\d{8}T\d{6}Z", headers["X-Sdk-Date"])
        assert headers["X-Project-Id"] == live_server.project_id
    for client in (theirs, forged, unknown):
        client.client.get_http_client().close()


def test_sdk_with_a_key_of_another_project_sees_no_job_of_this_one(
    sdk: Sdk, live_server: conftest.Live
) -> None:
    job_id = create(sdk, sdk_job("sdk-mine", command="sleep 30")).metadata.id
    other_project = live_server.new_project("sdk-other")
    stranger = live_server.new_user("sdk-stranger", "admin", other_project)
    # Their own key, aimed at this project: refused as if the project did not exist.
    aimed = connect(live_server, stranger.access_key, stranger.secret_key)
    at_home = connect(live_server, stranger.access_key, stranger.secret_key, other_project)

    with pytest.raises(sdk_errors.ClientRequestException) as err:
        aimed.job(job_id)
    assert (err.value.status_code, err.value.error_code) == (404, "ModelArts.2786")
    with pytest.raises(sdk_errors.ClientRequestException) as err:
        at_home.job(job_id)
    assert (err.value.status_code, err.value.error_code) == (404, "ModelArts.2775")
    assert at_home.search().total == 0
    assert sdk.job(job_id).metadata.name == "sdk-mine"
    for client in (aimed, at_home):
        client.client.get_http_client().close()
