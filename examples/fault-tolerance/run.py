"""Run the fault-tolerance example in one command, on a corral server of its own:

    python examples/fault-tolerance/run.py [--home DIR]

Three jobs of train.py, each going wrong in its own way (docs/fault-tolerance.md):

1. resume.yaml crashes after epoch 5; corral restarts it after a 1 s backoff, and the
   restart carries on from the checkpoint of epoch 5 (`corral show`: two running
   records, the first ended `user_exit`, `proc_restart`);
2. no-retry.yaml exits with 3 (a bad setting) and fails at once, retries left, because
   its rule says exit code 3 is not worth a retry;
3. hang.yaml goes silent after epoch 3; the watchdog finds it hung after its 3 s
   `hang_timeout`, stops it, and (`hang-retry`) restarts it from its checkpoint.

The job files are copied into a folder beside the server's home, so that their outputs
go there. Under a minute on two cores. Exits with 0 when all went so.
"""

from __future__ import annotations

import pathlib
import re
import shutil
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # examples/runner.py
import runner

HERE = pathlib.Path(__file__).resolve().parent
FILES = ("train.py", "resume.yaml", "no-retry.yaml", "hang.yaml")


def main() -> int:
    with runner.session(sys.argv[1:], __doc__.splitlines()[0]) as s:
        work = s.work / "fault-tolerance"
        work.mkdir(exist_ok=True)
        for name in FILES:
            shutil.copy(HERE / name, work / name)

        say("1. a crash, and a restart that resumes from the checkpoint")
        resume = submit(s, work / "resume.yaml")
        if s.corral("logs", "-f", resume) != 0:
            return 1
        s.corral("show", resume)
        s.corral("events", resume)

        say("2. a failure that its rule says not to retry")
        no_retry = submit(s, work / "no-retry.yaml")
        if s.corral("logs", "-f", no_retry) != 1:
            print("expected ft-no-retry to fail", file=sys.stderr)
            return 1
        s.corral("events", no_retry)

        say("3. a hang, found by the watchdog and restarted")
        hang = submit(s, work / "hang.yaml")
        if s.corral("logs", "-f", hang) != 0:
            return 1
        s.corral("events", hang)
        s.corral("show", hang)
    return 0


def submit(s: runner.Session, file: pathlib.Path) -> str:
    """The id of the job `corral submit FILE` made."""
    said = s.output("submit", str(file))
    found = re.search(r" as (\S+) \(", said)
    if found is None:
        raise SystemExit(f"no job id in {said!r}")
    return found.group(1)


def say(text: str) -> None:
    print(f"\n# {text}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
