"""A server killed while it fetches a job's input from object storage (a real S3 API server
on loopback, tests/s3.py; the server its own process, killed with SIGKILL): the next
server fetches it again, and the job finds in its input folder the objects, whole, and
nothing the killed server was writing."""

from __future__ import annotations

import os
import pathlib
import sys
import time
from collections.abc import Iterator

import pytest

from tests import factories, s3
from tests.integration.test_crash import ServerProcess

pytestmark = pytest.mark.slow
BIG = 96 * 2**20  #: bytes of the object being fetched when the server is killed


@pytest.fixture
def store() -> Iterator[s3.S3]:
    server = s3.start()
    yield server
    server.stop()


def test_a_fetch_a_killed_server_left_half_written_leaves_nothing_in_the_job_s_folder(
        tmp_path: pathlib.Path, store: s3.S3) -> None:
    bucket = store.bucket()
    data = os.urandom(2**20) * (BIG // 2**20)
    store.put(bucket, "data/big.bin", data)
    store.put(bucket, "data/small.txt", b"small\n")
    home = tmp_path / "home"
    home.mkdir()
    c = store.config
    (home / "config.toml").write_text(
        f'[s3]\nendpoint_url = "{c.endpoint_url}"\naccess_key = "{c.access_key}"\n'
        f'secret_key = "{c.secret_key}"\n')
    srv = ServerProcess(home, f"sqlite:///{home / 'corral.db'}",
                        env={"CORRAL_STORAGE_INTERVAL": "0.2"})
    srv.start()
    try:
        # (the channel comes as --data_url=<its local folder>)
        listing = ("import os, sys; d = sys.argv[1].split('=', 1)[1]; "
                   "print(sorted((n, os.path.getsize(os.path.join(d, n))) "
                   "for n in os.listdir(d)))")
        job_id = srv.submit(factories.make_job(
            name="fetch-killed", command=f"{sys.executable} -c \"{listing}\"",
            inputs={"data_url": f"s3://{bucket}/data/"}))
        folder = pathlib.Path(next(c["local_dir"] for c in srv.job(job_id)["algorithm"]["inputs"]
                                   if c["name"] == "data_url"))

        def half_written() -> bool:
            return folder.is_dir() and any(".tmp-" in n for n in os.listdir(folder))

        factories.wait_for(half_written, 60, "the server to be writing the object")
        srv.kill()
        assert any(".tmp-" in n for n in os.listdir(folder))  # what the killed one left
        srv.start()
        deadline = time.monotonic() + 120
        while srv.phase(job_id) not in ("Completed", "Failed", "Abnormal"):
            assert time.monotonic() < deadline, srv.job(job_id)["status"]
            time.sleep(0.2)
        assert srv.phase(job_id) == "Completed", srv.job(job_id)["status"]
        assert sorted(os.listdir(folder)) == ["big.bin", "small.txt"]
        assert (folder / "big.bin").read_bytes() == data
        r = srv.http.get(srv.path(f"/training-jobs/{job_id}/tasks/worker-0/logs/preview"))
        assert f"[('big.bin', {BIG}), ('small.txt', 6)]" in r.json()["content"]
    finally:
        srv.kill()
