"""The rules of a job's requirements: one spelling, what is refused, the environment's key,
and that a Ray pool refuses them."""

from __future__ import annotations

import pathlib

import pytest

from corral import settings as settings_mod
from corral.domain import environments, errors, specs
from corral.services import catalog as catalog_mod
from corral.services import environments as env_service
from corral.services import submit
from tests import factories


def test_spellings_of_one_request_are_one_request() -> None:
    a = environments.normalize(["Six", "tomli>=2,<3", "six", " requests[SOCKS,Security] "])
    b = environments.normalize(["requests[security,socks]", "tomli<3,>=2", "six"])

    assert a == b == ["requests[security,socks]", "six", "tomli<3,>=2"]
    assert environments.key(a, "/usr/bin/python3", "3.11.7") == environments.key(
        b, "/usr/bin/python3", "3.11.7")


def test_the_key_changes_with_the_interpreter_and_its_version() -> None:
    reqs = ["six"]
    base = environments.key(reqs, "/usr/bin/python3", "3.11.7")

    assert environments.key(reqs, "/usr/bin/python3", "3.11.8") != base
    assert environments.key(reqs, "/opt/py/bin/python", "3.11.7") != base
    assert environments.key(["six", "tomli"], "/usr/bin/python3", "3.11.7") != base


@pytest.mark.parametrize(("given", "says"), [
    (["-r other.txt"], "installer options"),
    (["pkg @ git+https://example.com/pkg"], "direct reference"),
    (["six\n--index-url=x"], "one line"),
    (["six" * 200], "one line"),
    (["six"] * 201, "at most 200"),
])
def test_what_is_not_a_named_requirement_is_refused(given: list[str], says: str) -> None:
    with pytest.raises(ValueError, match=says):
        environments.normalize(given)


def test_an_empty_list_asks_for_nothing() -> None:
    body = factories.make_job(command="true")
    body["algorithm"]["engine"] = {"requirements": []}

    assert specs.JobCreate.model_validate(body).algorithm.engine.requirements is None  # type: ignore[union-attr]


def test_a_ray_pool_refuses_requirements_in_words() -> None:
    cat = catalog_mod.Catalog(nodes=(), flavors=(), engines=(), default_flavor="",
                              pool_ids=("default", "gpus"),
                              pool_executor={"gpus": "ray:ray://head:10001"})
    body = factories.make_job(command="true")
    body["algorithm"]["engine"] = {"requirements": ["six"]}
    job = specs.JobCreate.model_validate(body)

    submit.check_requirements(cat, job, "default")  # this machine's pool: taken
    with pytest.raises(errors.BadParameter, match="runs on a Ray cluster"):
        submit.check_requirements(cat, job, "gpus")


def test_the_installer_gets_pips_index_and_no_server_secret() -> None:
    env = env_service.build_env({"PIP_INDEX_URL": "https://mirror.example/simple",
                                 "CORRAL_SERVER_KEY": "secret", "PATH": "/bin"})

    assert env["UV_INDEX_URL"] == "https://mirror.example/simple"
    assert "CORRAL_SERVER_KEY" not in env and env["UV_PYTHON_DOWNLOADS"] == "never"
    kept = env_service.build_env({"PIP_INDEX_URL": "a", "UV_INDEX_URL": "b"})
    assert kept["UV_INDEX_URL"] == "b"


def test_without_uv_the_build_is_venv_and_pip(tmp_path: pathlib.Path) -> None:
    settings = settings_mod.Settings(home=tmp_path, environment_installer="pip")
    assert env_service.installer(settings) is None
    make, install = env_service.build_commands(None, "/usr/bin/python3",
                                               pathlib.Path("/e"), pathlib.Path("/e/r.txt"))
    assert make == ["/usr/bin/python3", "-m", "venv", "/e"]
    assert install[:3] == ["/e/bin/python", "-m", "pip"]
