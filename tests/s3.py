"""A real S3 API server on loopback for tests: moto's server mode, in a thread.

Not a mocked client: corral talks HTTP to it through s3fs exactly as it would to any
S3-compatible store. moto keeps its buckets per process, so each test makes its own.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from typing import Any

from corral import settings as settings_mod
from tests import factories

KEY, SECRET = "corral-test-key", "corral-test-secret"


@dataclasses.dataclass
class S3:
    endpoint: str
    server: Any
    client: Any

    @property
    def config(self) -> settings_mod.S3Config:
        return settings_mod.S3Config(endpoint_url=self.endpoint, access_key=KEY,
                                     secret_key=SECRET, connect_timeout=2)

    def bucket(self) -> str:
        name = f"b-{uuid.uuid4().hex[:12]}"
        self.client.create_bucket(Bucket=name)
        return name

    def put(self, bucket: str, key: str, data: bytes) -> None:
        self.client.put_object(Bucket=bucket, Key=key, Body=data)

    def get(self, bucket: str, key: str) -> bytes:
        return bytes(self.client.get_object(Bucket=bucket, Key=key)["Body"].read())

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        found = self.client.list_objects_v2(Bucket=bucket, Prefix=prefix)
        return sorted(o["Key"] for o in found.get("Contents", []))

    def stop(self) -> None:
        self.server.stop()


def start() -> S3:
    import boto3
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    port = factories.free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=KEY,
                          aws_secret_access_key=SECRET, region_name="us-east-1")
    return S3(endpoint=endpoint, server=server, client=client)
