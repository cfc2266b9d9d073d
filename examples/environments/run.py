"""Run the environments example in one command, on a corral server of its own:

    python examples/environments/run.py [--home DIR]

It submits job.yaml (train.py needs tomli, which it lists in algorithm.engine.requirements):
corral builds a virtualenv with it while the job waits, and the job reads its settings with
tomli. A second job asking for the same runs in the same environment, not built again; a
job asking for a package that does not exist fails with the installer's words. About 10 s
when uv's cache has tomli. Exits with 0 when all of that went as said.
"""

from __future__ import annotations

import json
import pathlib
import re
import sys

import yaml

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # examples/runner.py
import runner

HERE = pathlib.Path(__file__).resolve().parent


def job_file(work: pathlib.Path, name: str, requirements: list[str]) -> pathlib.Path:
    """job.yaml under another name, asking for `requirements`."""
    body = yaml.safe_load((HERE / "job.yaml").read_text())
    body["metadata"]["name"] = name
    body["algorithm"]["code_dir"] = str(HERE)
    body["algorithm"]["engine"]["requirements"] = requirements
    path = work / f"{name}.json"
    path.write_text(json.dumps(body))
    return path


def submitted(s: runner.Session, path: pathlib.Path) -> str:
    found = re.search(r" as (\S+) \(", s.output("submit", str(path)))
    if found is None:
        raise SystemExit(f"submitting {path} said no job id")
    return found[1]


def main() -> int:
    with runner.session(sys.argv[1:], __doc__.splitlines()[0]) as s:
        first = submitted(s, job_file(s.work, "toml-reader", ["tomli>=2"]))
        if s.corral("logs", "-f", first) != 0:
            return 1
        s.corral("events", first)
        second = submitted(s, job_file(s.work, "toml-reader-again", ["TOMLI>=2"]))
        if s.corral("logs", "-f", second) != 0:
            return 1
        again = s.output("events", second)
        if "(cached" not in again or "Building environment" in again:
            print("the second job's environment was built again")
            return 1
        bad = submitted(s, job_file(s.work, "toml-typo", ["tomlii-no-such-package"]))
        ended = runner.wait("the job with a package that does not exist to fail",
                            lambda: s.api.get_job(bad) if s.api.get_job(bad)["status"][
                                "phase"] in ("Failed", "Completed") else None, timeout=120)
        status = ended["status"]
        print(f"\n# {ended['metadata']['name']} is {status['phase']}/"
              f"{status['secondary_phase']}: {status.get('reason', '')}")
        return 0 if status["phase"] == "Failed" else 1


if __name__ == "__main__":
    sys.exit(main())
