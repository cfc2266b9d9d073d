"""Run the images example in one command, on a corral server of its own:

    python examples/images/run.py [--home DIR]

It makes a small image (a static busybox alone: `podman import` of a root file system built
here), starts a server set up to run jobs in images (`container_runtime = "podman"`, and the
options this project's machines need), submits job.yaml, which gives that image as
`engine.image_url`, and shows its log: the task ran in the image, with the environment corral
gives tasks and its output folder bound at the same path. A second job, whose image does not
exist, fails with podman's words. About 5 s. Needs root and podman, runc and a static busybox
(Debian: apt-get install podman runc busybox-static). Exits with 0 when all went as said.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # examples/runner.py
import runner

HERE = pathlib.Path(__file__).resolve().parent
IMAGE = "localhost/corral-example-busybox:1"
BUSYBOX = "/bin/busybox"


def make_image() -> None:
    """IMAGE: busybox and its commands, and a file that says which image it is."""
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp, "rootfs")
        (root / "bin").mkdir(parents=True)
        shutil.copy(BUSYBOX, root / "bin" / "busybox")
        for applet in ("sh", "echo", "cat", "id"):
            (root / "bin" / applet).symlink_to("busybox")
        for folder in ("etc", "tmp", "proc", "sys", "dev"):
            (root / folder).mkdir()
        (root / "etc" / "image-name").write_text(IMAGE + "\n")
        tar = pathlib.Path(tmp, "rootfs.tar")
        subprocess.run(["tar", "-C", str(root), "-cf", str(tar), "."], check=True)
        made = subprocess.run(["podman", "import", str(tar), IMAGE], capture_output=True,
                              text=True)
        if made.returncode != 0:
            raise SystemExit(f"podman import failed: {made.stderr.strip()}")


def options() -> list[str]:
    """What `podman run` needs on this project's machines: runc (crun refuses their hybrid
    cgroup layout) and limits no higher than root's own there (podman's defaults raise
    them, which those machines do not allow)."""
    return [*(["--runtime=runc"] if shutil.which("runc") else []),
            "--ulimit=nofile=1024:1024", "--ulimit=nproc=1024:1024"]


def job_file(work: pathlib.Path, name: str, image: str) -> pathlib.Path:
    body = yaml.safe_load((HERE / "job.yaml").read_text())
    body["metadata"]["name"] = name
    body["algorithm"]["engine"]["image_url"] = image
    body["algorithm"]["outputs"][0]["remote"]["obs"]["obs_url"] = str(work / "out")
    path = work / f"{name}.json"
    path.write_text(json.dumps(body))
    return path


def submitted(s: runner.Session, path: pathlib.Path) -> str:
    found = re.search(r" as (\S+) \(", s.output("submit", str(path)))
    if found is None:
        raise SystemExit(f"submitting {path} said no job id")
    return found[1]


def main() -> int:
    if shutil.which("podman") is None or not os.path.exists(BUSYBOX):
        print("this example needs podman and a static busybox: "
              "apt-get install podman runc busybox-static")
        return 1
    make_image()
    # configured, not assumed: the server runs jobs in images because its settings say so
    os.environ["CORRAL_CONTAINER_RUNTIME"] = "podman"
    os.environ["CORRAL_CONTAINER_OPTIONS"] = json.dumps(options())
    try:
        with runner.session(sys.argv[1:], __doc__.splitlines()[0]) as s:
            job = submitted(s, job_file(s.work, "in-an-image", IMAGE))
            if s.corral("logs", "-f", job) != 0:
                return 1
            greeting = (s.work / "out" / "greeting.txt").read_text().strip()
            print(f"\n# {s.work / 'out' / 'greeting.txt'} on this machine: {greeting}")
            missing = submitted(s, job_file(s.work, "no-such-image",
                                            "localhost/corral-example-none:1"))
            ended = runner.wait("the job whose image does not exist to end",
                                lambda: s.api.get_job(missing) if s.api.get_job(missing)[
                                    "status"]["phase"] in ("Failed", "Completed") else None)
            s.corral("logs", missing)
            print(f"\n# {ended['metadata']['name']} is {ended['status']['phase']}")
            return 0 if greeting == "hello from a container" and \
                ended["status"]["phase"] == "Failed" else 1
    finally:
        subprocess.run(["podman", "rmi", "--force", IMAGE], capture_output=True)


if __name__ == "__main__":
    sys.exit(main())
