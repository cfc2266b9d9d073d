"""What a create body and a search body must look like, and what a refusal says."""

from __future__ import annotations

from typing import Any

import pydantic
import pytest

from corral.domain import errors, specs
from tests import factories


def accepted(body: dict[str, Any]) -> specs.JobCreate:
    return specs.parse(specs.JobCreate, body)


def refusal(body: dict[str, Any], model: type[specs.Model] = specs.JobCreate) -> str:
    """The message of the BadParameter that `body` is refused with."""
    with pytest.raises(errors.BadParameter) as caught:
        specs.parse(model, body)
    assert caught.value.error_code == "ModelArts.2788"
    return caught.value.message


def job(**overrides: Any) -> dict[str, Any]:
    overrides.setdefault("command", "python -c 'print(1)'")
    return factories.make_job(**overrides)


def with_algorithm(**fields: Any) -> dict[str, Any]:
    body = job()
    body["algorithm"].update(fields)
    return body


# --- metadata -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["a", "train_v2-final", "A" * 64, "0", "-_-"])
def test_names_of_letters_digits_dash_underscore_up_to_64_are_accepted(name: str) -> None:
    assert accepted(job(name=name)).metadata.name == name


@pytest.mark.parametrize(
    "name",
    [
        "",
        "A" * 65,
        "has space",
        "dot.ted",
        "slash/ed",
        "naïve",
        "semi;colon",
        "trailing\n",
        "\nleading",
    ],
)
def test_other_names_are_refused(name: str) -> None:
    body = job()
    body["metadata"]["name"] = name
    assert "metadata.name" in refusal(body)


def test_a_missing_name_is_refused_saying_where() -> None:
    body = job()
    del body["metadata"]["name"]
    assert refusal(body) == "metadata.name: Field required"


def test_description_up_to_256_characters() -> None:
    body = job()
    body["metadata"]["description"] = "d" * 256
    assert accepted(body).metadata.description == "d" * 256
    body["metadata"]["description"] = "d" * 257
    assert "metadata.description" in refusal(body)


def test_a_null_description_reads_as_empty() -> None:
    body = job()
    body["metadata"]["description"] = None
    assert accepted(body).metadata.description == ""


@pytest.mark.parametrize("value", [0, "0", 2, "7", 100, "100"])
def test_retry_annotation_between_0_and_100(value: Any) -> None:
    body = job()
    body["metadata"]["annotations"] = {"fault-tolerance/job-retry-num": value}
    created = accepted(body)
    assert created.metadata.retry_limit == int(value)
    assert created.metadata.annotations["fault-tolerance/job-retry-num"] == str(value)


@pytest.mark.parametrize("value", ["-1", 101, "1000", "two", "1.5", "", True])
def test_retry_annotation_outside_0_to_100_or_not_an_integer_is_refused(value: Any) -> None:
    body = job()
    body["metadata"]["annotations"] = {"fault-tolerance/job-retry-num": value}
    assert "fault-tolerance/job-retry-num" in refusal(body)


def test_no_retry_annotation_means_no_retry() -> None:
    assert accepted(job()).metadata.retry_limit == 0


def test_other_annotations_are_kept_as_strings() -> None:
    body = job()
    body["metadata"]["annotations"] = {"team": "vision", "priority": 3, "shared": False}
    assert accepted(body).metadata.annotations == {
        "team": "vision",
        "priority": "3",
        "shared": "false",
    }


# --- algorithm ----------------------------------------------------------------------------


def test_command_alone_is_enough() -> None:
    alg = accepted(job(command="echo hi")).algorithm
    assert alg.command == "echo hi"
    assert alg.code_dir is None


def test_code_dir_with_boot_file_is_enough() -> None:
    body = factories.make_job(code_dir="/src/proj", boot_file="train.py")
    alg = accepted(body).algorithm
    assert (alg.code_dir, alg.boot_file) == ("/src/proj", "train.py")


def test_code_dir_without_boot_file_is_refused() -> None:
    body = factories.make_job(command="true")
    body["algorithm"]["code_dir"] = "/src/proj"
    assert "code_dir and algorithm.boot_file go together" in refusal(body)


def test_boot_file_without_code_dir_is_refused() -> None:
    body = factories.make_job(command="true")
    body["algorithm"]["boot_file"] = "train.py"
    assert "go together" in refusal(body)


def test_an_algorithm_with_nothing_to_run_is_refused() -> None:
    body = factories.make_job()
    assert body["algorithm"] == {}
    assert "code_dir + boot_file, or command" in refusal(body)


@pytest.mark.parametrize("field", ["subscription_id", "item_version_id"])
def test_subscribed_algorithms_are_refused(field: str) -> None:
    assert "not supported" in refusal(with_algorithm(**{field: "abc"}))


def test_an_algorithm_id_alone_is_a_job_body() -> None:
    body = factories.make_job()
    body["algorithm"] = {"id": "0b6c6f0e"}  # the service fills the rest from the algorithm
    assert accepted(body).algorithm.id == "0b6c6f0e"


def test_a_container_image_is_a_reference_without_a_transport() -> None:
    assert accepted(with_algorithm(engine={"image_url": "swr.example/train:1"}))
    body = with_algorithm(engine={"image_url": "oci:/var/lib/x"})
    assert "is not an image reference" in refusal(body)


def test_an_engine_by_name_is_accepted() -> None:
    body = with_algorithm(engine={"engine_name": "Python", "engine_version": "3.11"})
    assert accepted(body).algorithm.engine == specs.Engine(
        engine_name="Python", engine_version="3.11"
    )


def test_parameters_numbers_and_booleans_become_strings() -> None:
    body = job(
        parameters={
            "lr": 0.001,
            "epochs": 5,
            "shuffle": True,
            "fast": False,
            "tag": "v1",
            "empty": None,
        }
    )
    values = {p.name: p.value for p in accepted(body).algorithm.parameters}
    assert values == {
        "lr": "0.001",
        "epochs": "5",
        "shuffle": "true",
        "fast": "false",
        "tag": "v1",
        "empty": "",
    }


@pytest.mark.parametrize("name", ["", "with space", "a=b", "x" * 129, "lr\n"])
def test_parameter_names_with_spaces_or_equals_are_refused(name: str) -> None:
    assert "parameters" in refusal(job(parameters={name: "1"}))


def test_duplicate_channel_names_are_refused() -> None:
    body = job(inputs={"data": "/d"}, outputs={"data": "/o"})
    assert "duplicate input/output channel names: data" in refusal(body)


def test_two_inputs_with_one_name_are_refused() -> None:
    body = job(inputs={"data": "/d"})
    body["algorithm"]["inputs"].append({"name": "data", "remote": {"obs": {"obs_url": "/e"}}})
    assert "duplicate" in refusal(body)


def test_distinct_channels_are_kept_with_their_urls() -> None:
    alg = accepted(job(inputs={"data": "/d"}, outputs={"model": "/o"})).algorithm
    assert [(c.name, c.url) for c in alg.inputs] == [("data", "/d")]
    assert [(c.name, c.url) for c in alg.outputs] == [("model", "/o")]


@pytest.mark.parametrize("name", ["1data", "da ta", "da.ta", "", "x" * 65])
def test_bad_channel_names_are_refused(name: str) -> None:
    assert "channel names" in refusal(job(inputs={name: "/d"}))


def test_an_input_from_a_dataset_without_a_version_is_refused() -> None:
    body = job()
    body["algorithm"]["inputs"] = [{"name": "data", "remote": {"dataset": {"id": "ds1"}}}]
    assert "remote.dataset.version_id is missing" in refusal(body)


@pytest.mark.parametrize("name", ["1ABC", "A-B", "A B", "A=B", "", "PATH\n"])
def test_bad_environment_variable_names_are_refused(name: str) -> None:
    assert "environment variable name" in refusal(job(environments={name: "1"}))


def test_environments_as_a_map_with_values_made_strings() -> None:
    body = job(environments={"_A1": "x", "THREADS": 4, "DEBUG": True, "RATE": 0.5})
    assert accepted(body).algorithm.environments == {
        "_A1": "x",
        "THREADS": "4",
        "DEBUG": "true",
        "RATE": "0.5",
    }


def test_environments_as_a_list_of_maps_as_modelarts_returns_them() -> None:
    body = with_algorithm(environments=[{"A": "1"}, {"B": 2}])
    assert accepted(body).algorithm.environments == {"A": "1", "B": "2"}


def test_environments_as_a_list_of_strings_is_refused() -> None:
    assert "environments" in refusal(with_algorithm(environments=["A=1"]))


def test_too_many_or_too_long_environment_variables_are_refused() -> None:
    many = {f"V{i}": "1" for i in range(101)}
    assert "at most 100" in refusal(job(environments=many))
    assert "longer than 4096" in refusal(job(environments={"V": "x" * 4097}))


# --- spec and kind ------------------------------------------------------------------------


@pytest.mark.parametrize("count", [0, -1, 1025])
def test_node_count_outside_1_to_1024_is_refused(count: int) -> None:
    assert "spec.resource.node_count" in refusal(job(node_count=count))


def test_unknown_fields_are_ignored_so_modelarts_bodies_still_load() -> None:
    body = job()
    body["metadata"]["tags"] = [{"key": "k"}]
    body["spec"]["resource"]["extend_params"] = {"x": 1}
    assert accepted(body).metadata.name == body["metadata"]["name"]


def test_kind_other_than_job_is_refused() -> None:
    assert "kind" in refusal(job(kind="notebook"))


def test_a_body_that_is_not_an_object_is_refused_readably() -> None:
    msg = refusal(["not", "a", "job"])  # type: ignore[arg-type]
    assert msg and "Traceback" not in msg


def test_a_refusal_names_at_most_three_problems_on_one_line() -> None:
    body = {
        "kind": "job",
        "metadata": {},
        "algorithm": {"id": "x"},
        "spec": {"resource": {"node_count": 0}},
    }
    msg = refusal(body)
    assert "\n" not in msg
    assert len(msg.split("; ")) <= 3
    assert "Value error," not in msg


# --- search -------------------------------------------------------------------------------


def search(**fields: Any) -> specs.Search:
    return specs.parse(specs.Search, fields)


def a_filter(key: str, operator: str, value: Any) -> dict[str, Any]:
    return {"key": key, "operator": operator, "value": value}


def test_an_empty_search_pages_ten_newest_first() -> None:
    s = search()
    assert (s.offset, s.limit, s.sort_by, s.order, s.filters) == (0, 10, "create_time", "desc", [])


@pytest.mark.parametrize("operator", ["like", "in", "not"])
def test_name_filters_with_like_in_not(operator: str) -> None:
    s = search(filters=[a_filter("name", operator, ["train", "eval"])])
    assert s.filters[0].operator == operator
    assert s.filters[0].value == ["train", "eval"]


def test_filter_operator_defaults_to_in_and_a_single_value_becomes_a_list() -> None:
    f = search(filters=[{"key": "name", "value": "train"}]).filters[0]
    assert (f.operator, f.value) == ("in", ["train"])


@pytest.mark.parametrize("operator", ["gt", "equals", "LIKE", ""])
def test_unknown_operators_are_refused(operator: str) -> None:
    assert "operator" in refusal({"filters": [a_filter("name", operator, ["x"])]}, specs.Search)


def test_unknown_filter_keys_are_refused() -> None:
    assert "key" in refusal({"filters": [a_filter("owner", "in", ["x"])]}, specs.Search)


def test_between_takes_two_create_times() -> None:
    f = search(filters=[a_filter("create_time", "between", [1700000000000, "1800000000000"])])
    assert f.filters[0].value == ["1700000000000", "1800000000000"]


@pytest.mark.parametrize("value", [[1], [1, 2, 3]])
def test_between_with_other_than_two_values_is_refused(value: list[int]) -> None:
    msg = refusal({"filters": [a_filter("create_time", "between", value)]}, specs.Search)
    assert "exactly two values" in msg


@pytest.mark.parametrize(
    "value", ["yesterday", "1.5", "1e3", "--5", "²", "", "12 ", "1" + "0" * 30]
)
def test_create_time_values_must_be_integers(value: str) -> None:
    msg = refusal({"filters": [a_filter("create_time", "in", [value])]}, specs.Search)
    assert "timestamps in milliseconds" in msg


def test_create_time_accepts_negative_and_integer_values() -> None:
    f = search(filters=[a_filter("create_time", "not", [-5, "42"])]).filters[0]
    assert f.value == ["-5", "42"]


def test_like_on_create_time_is_refused() -> None:
    assert "'like' does not apply" in refusal(
        {"filters": [a_filter("create_time", "like", ["17"])]}, specs.Search
    )


def test_known_phases_filter() -> None:
    f = search(filters=[a_filter("phase", "in", ["Running", "Completed"])]).filters[0]
    assert f.value == ["Running", "Completed"]


@pytest.mark.parametrize(
    "key,value", [("phase", "Queuing"), ("phase", "running"), ("secondary_phase", "Sleeping")]
)
def test_unknown_phase_names_are_refused(key: str, value: str) -> None:
    msg = refusal({"filters": [a_filter(key, "in", [value])]}, specs.Search)
    assert f"unknown {key} '{value}'" in msg


def test_like_on_phase_takes_any_text() -> None:
    assert search(filters=[a_filter("phase", "like", ["Run"])]).filters[0].value == ["Run"]


def test_a_filter_needs_at_least_one_value() -> None:
    assert "value" in refusal({"filters": [a_filter("name", "in", [])]}, specs.Search)


@pytest.mark.parametrize("limit", [1, 50])
def test_limit_between_1_and_50(limit: int) -> None:
    assert search(limit=limit).limit == limit


@pytest.mark.parametrize("limit", [0, 51, -1])
def test_limit_outside_1_to_50_is_refused(limit: int) -> None:
    assert "limit" in refusal({"limit": limit}, specs.Search)


def test_offset_may_not_be_negative() -> None:
    assert search(offset=3).offset == 3
    assert "offset" in refusal({"offset": -1}, specs.Search)


def test_sort_and_order_are_checked() -> None:
    s = search(sort_by="duration", order="asc")
    assert (s.sort_by, s.order) == ("duration", "asc")
    assert "sort_by" in refusal({"sort_by": "size"}, specs.Search)
    assert "order" in refusal({"order": "up"}, specs.Search)


# --- bounds and patterns ------------------------------------------------------------------


@pytest.mark.parametrize("offset", [specs.MAX_COUNT + 1, 2**62, 10**20])
def test_a_search_offset_beyond_the_bound_is_refused(offset: int) -> None:
    """Pages of up to 50 rows: an offset past 2^31 pages would overflow the database."""
    assert "offset" in refusal({"offset": offset, "limit": 50}, specs.Search)
    assert search(offset=specs.MAX_COUNT, limit=50).offset == specs.MAX_COUNT


@pytest.mark.parametrize("value", [str(specs.MAX_TIME_MS + 1), str(-(2**62)), str(2**63)])
def test_create_time_values_end_with_the_year_9999(value: str) -> None:
    msg = refusal({"filters": [a_filter("create_time", "in", [value])]}, specs.Search)
    assert "timestamps in milliseconds" in msg


@pytest.mark.parametrize("version", [0, specs.MAX_COUNT + 1, 10**20])
def test_a_model_version_beyond_the_bounds_is_refused(version: int) -> None:
    body = job(kind="inference", model={"name": "m", "version": version})
    assert "model.version" in refusal(body)


@pytest.mark.parametrize("pool", ["", "a b", "pool/1", "p" * 65, "gpu\n"])
def test_a_pool_id_the_configuration_could_not_define_is_refused(pool: str) -> None:
    body = job()
    body["spec"]["resource"]["pool_id"] = pool
    assert "pool ids are 1-64" in refusal(body)


def test_the_schema_states_the_patterns_validation_enforces() -> None:
    schema = specs.JobCreate.model_json_schema()
    defs = schema["$defs"]
    assert defs["Metadata"]["properties"]["name"]["pattern"] == specs.NAME_PATTERN
    pool = defs["Resource"]["properties"]["pool_id"]["anyOf"][0]
    assert pool["pattern"] == "^[A-Za-z0-9_.-]{1,64}$"
    assert defs["Input"]["properties"]["name"]["pattern"].startswith("^[A-Za-z_]")
    version = defs["ModelRef"]["properties"]["version"]["anyOf"][0]
    assert (version["minimum"], version["maximum"]) == (1, specs.MAX_COUNT)


@pytest.mark.parametrize("text", ["ok", "a-b_c", "x" * 64])
def test_a_pattern_takes_the_whole_string_and_only_it(text: str) -> None:
    rule = pydantic.TypeAdapter(specs.Name)
    assert rule.validate_python(text) == text
    for bad in (text + "\n", "\n" + text, text + " ", text + "x" * 64):
        with pytest.raises(pydantic.ValidationError, match="name must be 1-64"):
            rule.validate_python(bad)
