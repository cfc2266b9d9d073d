"""corral's SDK-HMAC-SHA256 verifier against the official SDK's signer, and its refusals."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from huaweicloudsdkcore.auth.credentials import BasicCredentials
from huaweicloudsdkcore.sdk_request import SdkRequest
from huaweicloudsdkcore.signer.signer import Signer

from corral.domain import errors, signing

NOW = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
AK, SK = "AKEXAMPLE0000000000", "secret-key-of-forty-characters-000000000"


def sdk_signed(method: str = "POST", path: str = "/v2/p1/training-jobs",
               query: list[tuple[str, Any]] | None = None, body: bytes = b'{"a": 1}',
               headers: dict[str, str] | None = None, date: datetime.datetime = NOW,
               sk: str = SK) -> dict[str, Any]:
    """A request as the SDK signs it: what corral's verifier receives."""
    req = SdkRequest(method=method, schema="http", host="127.0.0.1:8765", resource_path=path,
                     query_params=list(query or []),
                     header_params={"Content-Type": "application/json",
                                    "X-Sdk-Date": date.strftime(signing.DATE_FORMAT),
                                    **(headers or {})},
                     body=body)
    Signer(BasicCredentials(AK, sk)).sign(req)
    path_sent, _, query_sent = req.uri.partition("?")
    return {"method": method, "path": path_sent, "query": query_sent, "body": body,
            "headers": {k.lower(): v.encode("latin-1") for k, v in req.header_params.items()}}


def verify(request: dict[str, Any], now: datetime.datetime = NOW, sk: str = SK) -> None:
    auth = signing.parse_authorization(request["headers"]["authorization"].decode())
    signing.verify(auth, sk, method=request["method"], path=request["path"],
                   query=request["query"], headers=request["headers"], body=request["body"],
                   now=now)


@pytest.mark.parametrize("request_kw", [
    {},
    {"method": "GET", "body": b""},
    {"method": "GET", "body": b"", "query": [("limit", 5), ("order", "desc"), ("a", ["z", "b"]),
                                              ("pattern", "x y/z~é"), ("flag", True)]},
    {"path": "/v2/p1/training-jobs/a%20b/tasks/worker-0/logs/preview", "method": "GET"},
    {"headers": {"User-Agent": "huaweicloud-usdk-python/3.0 ünïcode", "X-Project-Id": "p1"}},
    {"body": '{"name": "données"}'.encode()},
], ids=["post", "get", "query", "encoded-path", "non-ascii-header", "non-ascii-body"])
def test_what_the_sdk_signs_verifies(request_kw: dict[str, Any]) -> None:
    verify(sdk_signed(**request_kw))


def test_corrals_own_signer_signs_as_the_sdk_does() -> None:
    sdk = sdk_signed(method="GET", body=b"", query=[("limit", 5)])
    mine = signing.sign(AK, SK, method="GET", path=sdk["path"], query=sdk["query"],
                        headers={"Host": "127.0.0.1:8765", "Content-Type": "application/json"},
                        body=b"", now=NOW)

    assert mine["Authorization"] == sdk["headers"]["authorization"].decode()


@pytest.mark.parametrize(("tamper", "says"), [
    (lambda r: r.update(body=b'{"a": 2}'), "signature does not match"),
    (lambda r: r.update(body=b""), "signature does not match"),
    (lambda r: r.update(path="/v2/p2/training-jobs"), "signature does not match"),
    (lambda r: r.update(method="PUT"), "signature does not match"),
    (lambda r: r.update(query="limit=50"), "signature does not match"),
    (lambda r: r["headers"].update(host=b"evil.example:80"), "signature does not match"),
    (lambda r: r["headers"].update({"x-sdk-content-sha256": b"UNSIGNED-PAYLOAD"}),
     "does not match the body"),
    (lambda r: r["headers"].pop("content-type"), "missing from the request: content-type"),
], ids=["body", "body-dropped", "path", "method", "query", "host", "unsigned-payload",
        "header-dropped"])
def test_a_changed_request_is_refused(tamper: Any, says: str) -> None:
    request = sdk_signed()
    tamper(request)

    with pytest.raises(errors.BadCredential, match=says):
        verify(request)


def test_the_wrong_secret_is_refused() -> None:
    with pytest.raises(errors.BadCredential, match="signature does not match"):
        verify(sdk_signed(sk="another-secret"))


@pytest.mark.parametrize("skew_min", [-16, 16, -60 * 24])
def test_a_date_outside_15_minutes_is_refused(skew_min: int) -> None:
    request = sdk_signed(date=NOW + datetime.timedelta(minutes=skew_min))

    with pytest.raises(errors.BadCredential, match="15 minutes"):
        verify(request)


@pytest.mark.parametrize("skew_min", [-14, 14])
def test_a_date_within_15_minutes_is_accepted(skew_min: int) -> None:
    verify(sdk_signed(date=NOW + datetime.timedelta(minutes=skew_min)))


@pytest.mark.parametrize(("value", "says"), [
    ("SDK-HMAC-SHA256 Access=AK, Signature=00", "malformed"),
    ("SDK-HMAC-SHA256 Access=AK, SignedHeaders=host, Signature=00", "x-sdk-date"),
    ("SDK-HMAC-SHA256 Access=AK, SignedHeaders=x-sdk-date, Signature=00", "host"),
    ("SDK-HMAC-SHA256 Access=AK, SignedHeaders=x-sdk-date;host, Signature=00", "sorted"),
    ("SDK-HMAC-SHA256 Access=AK, SignedHeaders=host;x-sdk-date, Signature=zz", "malformed"),
])
def test_a_malformed_authorization_is_refused(value: str, says: str) -> None:
    with pytest.raises(errors.BadCredential, match=says):
        signing.parse_authorization(value)
