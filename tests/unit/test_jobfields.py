"""The seed spec's fields that corral maps onto its own or refuses (domain/jobfields.py):
`spec.auto_stop` stops a job as max_run_time does, `algorithm.summary` is a folder of an
output channel, volumes and the application annotations are refused in words."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator
from typing import Any

import pytest

from corral.cli import jobfile
from corral.domain import errors, jobfields, specs
from tests import factories
from tests.unit.test_reconciler import World
from tests.unit.test_reconciler_scheduling import make_world


@pytest.fixture
def world(tmp_path: pathlib.Path) -> Iterator[World]:
    w = make_world(tmp_path)
    yield w
    w.store.dispose()


def test_a_job_past_its_auto_stop_is_stopped_saying_so(world: World) -> None:
    job_id = world.submit(spec={"resource": {"flavor_id": "corral.cpu.1u"},
                                "auto_stop": {"time_unit": "HOURS", "duration": 1}})
    world.tick()
    world.clock.advance(3599)
    world.tick()
    assert world.job(job_id).phase == "Running"
    world.clock.advance(2)
    world.tick(3)
    job = world.job(job_id)
    assert (job.phase, job.failure_class) == ("Failed", "timeout")
    assert job.failure_message == "timeout: ran past its auto_stop of 60 min"


def spec_of(**spec: Any) -> specs.Spec:
    return specs.Spec.model_validate({"resource": {}, **spec})


def test_the_reason_names_the_limit_that_applies() -> None:
    hour = {"time_unit": "HOURS", "duration": 1}
    assert spec_of(fault_tolerance={"max_run_time": 600}).run_limit_name == "max_run_time"
    assert spec_of(auto_stop=hour).run_limit_name == "auto_stop"
    earlier = spec_of(fault_tolerance={"max_run_time": 7200}, auto_stop=hour)
    assert (earlier.max_run_time, earlier.run_limit_name) == (3600, "auto_stop")
    later = spec_of(fault_tolerance={"max_run_time": 600}, auto_stop=hour)
    assert (later.max_run_time, later.run_limit_name) == (600, "max_run_time")


def test_the_earlier_of_auto_stop_and_max_run_time_applies() -> None:
    hours = {"time_unit": "HOURS", "duration": 2}
    assert spec_of(auto_stop=hours).max_run_time == 7200
    assert spec_of(auto_stop=hours, fault_tolerance={"max_run_time": 60}).max_run_time == 60
    assert spec_of(auto_stop={**hours, "duration": 1},
                   fault_tolerance={"max_run_time": 86400}).max_run_time == 3600
    assert spec_of().max_run_time is None


@pytest.mark.parametrize(("auto_stop", "message"), [
    ({"time_unit": "MINUTES", "duration": 5}, "spec.auto_stop.time_unit: Input should be 'HOURS'"),
    ({"time_unit": "HOURS", "duration": 0}, "spec.auto_stop.duration: Input should be greater"),
    ({"time_unit": "HOURS"}, "spec.auto_stop.duration: Field required"),
])
def test_a_bad_auto_stop_is_refused(auto_stop: dict[str, Any], message: str) -> None:
    body = factories.make_job(command="true")
    body["spec"]["auto_stop"] = auto_stop
    with pytest.raises(errors.BadParameter) as exc:
        specs.parse(specs.JobCreate, body)
    assert exc.value.message.startswith(message)


@pytest.mark.parametrize(("volume", "words"), [
    ({"nfs": {"nfs_server_path": "10.0.0.1:/data", "local_path": "/data"}},
     "spec.volumes[0].nfs: corral mounts no volumes; mount the NFS export on the nodes"),
    ({"obs": {"obs_path": "/bucket/data", "local_path": "/data"}},
     "spec.volumes[0].obs: corral mounts no volumes; give the OBS path as an input or "
     "output channel"),
    ({"pfs": {"pfs_path": "/bucket/data"}}, "spec.volumes[0].pfs: corral mounts no volumes"),
    ({"other": {}}, "spec.volumes[0]: corral mounts no volumes; give the data as an input or "
     "output channel"),
])
def test_a_volume_is_refused_with_what_to_use_instead(volume: dict[str, Any], words: str) -> None:
    body = factories.make_job(command="true")
    body["spec"]["volumes"] = [volume]
    with pytest.raises(errors.BadParameter) as exc:
        specs.parse(specs.JobCreate, body)
    assert words in exc.value.message
    body["spec"]["volumes"] = []  # none asked for: nothing to refuse
    specs.parse(specs.JobCreate, body)


@pytest.mark.parametrize(("key", "instead"), [
    ("jupyter-lab/enable", "create a notebook"),
    ("mindstudio-insight/enable", "corral starts no MindStudio Insight"),
])
def test_an_application_annotation_is_refused_when_true(key: str, instead: str) -> None:
    specs.parse(specs.JobCreate, factories.make_job(command="true", annotations={key: "false"}))
    with pytest.raises(errors.BadParameter) as exc:
        specs.parse(specs.JobCreate, factories.make_job(command="true",
                                                        annotations={key: "true"}))
    assert f"metadata.annotations: {key}: " in exc.value.message
    assert instead in exc.value.message
    with pytest.raises(errors.BadParameter, match="must be true or false"):
        specs.parse(specs.JobCreate, factories.make_job(command="true",
                                                        annotations={key: "yes"}))


def test_tensorboard_is_asked_for_with_true_and_needs_a_tensorboard_summary() -> None:
    asked = factories.make_job(command="true", annotations={"tensorboard/enable": "true"})
    body = specs.parse(specs.JobCreate, asked)
    assert jobfields.wants_tensorboard(body.metadata.annotations)
    with pytest.raises(ValueError, match=r"the job names none: give algorithm\.summary"):
        jobfields.check_tensorboard(body.algorithm.summary)
    jobfields.check_tensorboard(summary_job("/out/run/tb").algorithm.summary)
    insight = summary_job("/out/run/tb", log_type="mindstudio-insight").algorithm.summary
    with pytest.raises(ValueError, match="log_type is mindstudio-insight; corral serves "
                       "TensorBoard only"):
        jobfields.check_tensorboard(insight)
    off = factories.make_job(command="true", annotations={"tensorboard/enable": "false"})
    assert not jobfields.wants_tensorboard(specs.parse(specs.JobCreate,
                                                       off).metadata.annotations)
    with pytest.raises(errors.BadParameter, match="tensorboard/enable must be true or false"):
        specs.parse(specs.JobCreate, factories.make_job(
            command="true", annotations={"tensorboard/enable": "yes"}))


def summary_job(pfs_path: str, **summary: Any) -> specs.JobCreate:
    body = factories.make_job(command="true", outputs={"train_url": "/out/run"})
    body["algorithm"]["summary"] = {"log_type": "tensorboard",
                                    "log_dir": {"pfs": {"pfs_path": pfs_path}}, **summary}
    return specs.parse(specs.JobCreate, body)


def test_a_summary_folder_is_one_of_an_output_channel() -> None:
    assert summary_job("/out/run").algorithm.summary_dir() == "/out/run"
    assert summary_job("/out/run/tb/").algorithm.summary_dir() == "/out/run/tb"
    for outside in ("/out/elsewhere", "/out/run/../x", "/out"):
        with pytest.raises(errors.BadParameter, match="is in none of the job's output "
                           r"channels \(train_url \(/out/run\)\)"):
            summary_job(outside).algorithm.summary_dir()


@pytest.mark.parametrize(("summary", "message"), [
    ({"data_sources": [{"job": {"job_id": "x"}}]}, "corral has no visualization jobs"),
    ({"log_type": None}, "algorithm.summary.log_type (tensorboard or mindstudio-insight) is "
     "needed with log_dir"),
    ({"log_type": "matplotlib"}, "algorithm.summary.log_type: Input should be"),
])
def test_a_summary_corral_cannot_honour_is_refused(summary: dict[str, Any],
                                                    message: str) -> None:
    with pytest.raises(errors.BadParameter) as exc:
        summary_job("/out/run", **summary)
    assert message in exc.value.message


def test_a_job_files_relative_summary_folder_is_taken_from_its_folder(
        tmp_path: pathlib.Path) -> None:
    body = factories.make_job(command="true", outputs={"train_url": "./out"})
    body["algorithm"]["summary"] = {"log_type": "tensorboard",
                                    "log_dir": {"pfs": {"pfs_path": "./out/tb"}}}
    resolved = specs.parse(specs.JobCreate, jobfile.resolve_paths(body, tmp_path))
    assert resolved.algorithm.summary_dir() == str(tmp_path / "out" / "tb")
