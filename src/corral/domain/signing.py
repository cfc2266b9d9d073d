"""The `SDK-HMAC-SHA256` request signature that the Huawei Cloud SDKs send, both ways.

A signed request carries `X-Sdk-Date` (UTC, `%Y%m%dT%H%M%SZ`) and
`Authorization: SDK-HMAC-SHA256 Access=<ak>, SignedHeaders=<h1;h2>, Signature=<hex>`,
where the signature is HMAC-SHA256(secret key, string to sign) and

    string to sign    = SDK-HMAC-SHA256 LF <X-Sdk-Date> LF hex(sha256(canonical request))
    canonical request = METHOD LF URI LF QUERY LF HEADERS LF SIGNED HEADERS LF hex(sha256(body))

URI: the decoded path, each segment percent-encoded (only letters, digits and `_.-~` left
as they are), always ending in `/`. QUERY: the decoded `key=value` pairs sorted, each
side encoded the same way, joined by `&`. HEADERS: `name:value\\n` for each signed header
(lower-case name, trimmed value), in the order SignedHeaders lists them. An empty body
hashes as the empty string.

Pure functions only: the verifier (api/auth.py) and corral's own client both use them,
so the two can only disagree with a third party, which is what the tests check against
the official SDK.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import hmac
import re
from collections.abc import Mapping
from urllib.parse import parse_qsl, quote, unquote

from corral.domain import errors

ALGORITHM = "SDK-HMAC-SHA256"
DATE_HEADER = "x-sdk-date"
CONTENT_HASH_HEADER = "x-sdk-content-sha256"
DATE_FORMAT = "%Y%m%dT%H%M%SZ"
#: how far a request's X-Sdk-Date may be from the server's clock, either way
MAX_SKEW = datetime.timedelta(minutes=15)
#: headers a signature must cover, so that neither the date nor the target can be swapped
REQUIRED_SIGNED = ("host", DATE_HEADER)
EMPTY_HASH = hashlib.sha256(b"").hexdigest()

_AUTH_RE = re.compile(
    r"SDK-HMAC-SHA256\s+Access=([^,\s]+),\s*SignedHeaders=([^,\s]+),\s*Signature=([0-9a-fA-F]+)")


@dataclasses.dataclass(frozen=True)
class Authorization:
    access_key: str
    signed_headers: tuple[str, ...]
    signature: str


def is_signed(authorization: str | None) -> bool:
    return bool(authorization) and authorization.lstrip().startswith(ALGORITHM + " ")  # type: ignore[union-attr]


def parse_authorization(value: str) -> Authorization:
    m = _AUTH_RE.fullmatch(value.strip())
    if not m:
        raise errors.BadCredential(
            "malformed Authorization header: expected 'SDK-HMAC-SHA256 Access=..., "
            "SignedHeaders=..., Signature=...'")
    signed = tuple(m[2].split(";"))
    if any(not h or h != h.lower() for h in signed) or list(signed) != sorted(signed):
        raise errors.BadCredential("SignedHeaders must be lower-case names, sorted")
    missing = [h for h in REQUIRED_SIGNED if h not in signed]
    if missing:
        raise errors.BadCredential(f"the signature must cover the headers {', '.join(missing)}")
    return Authorization(access_key=m[1], signed_headers=signed, signature=m[3].lower())


def _encode(s: str) -> str:
    return quote(s, safe="~")


def canonical_uri(path: str) -> str:
    """`path` as sent (percent-encoded or not): decoded, then each segment re-encoded."""
    uri = "/".join(_encode(seg) for seg in unquote(path).split("/"))
    return uri if uri.endswith("/") else uri + "/"


def canonical_query(query: str) -> str:
    pairs = sorted(parse_qsl(query, keep_blank_values=True))
    return "&".join(f"{_encode(k)}={_encode(v)}" for k, v in pairs)


def body_hash(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest() if body else EMPTY_HASH


def canonical_request(method: str, path: str, query: str, headers: Mapping[str, bytes],
                      signed_headers: tuple[str, ...], payload_hash: str) -> bytes:
    """`headers`: lower-case names to raw values (as bytes on the wire, i.e. UTF-8)."""
    lines = [method.upper().encode(), canonical_uri(path).encode(),
             canonical_query(query).encode()]
    canon_headers = b"".join(h.encode() + b":" + headers[h].strip() + b"\n"
                             for h in signed_headers)
    return b"\n".join([*lines, canon_headers, ";".join(signed_headers).encode(),
                       payload_hash.encode()])


def string_to_sign(date: str, canonical: bytes) -> bytes:
    return f"{ALGORITHM}\n{date}\n{hashlib.sha256(canonical).hexdigest()}".encode()


def signature(secret_key: str, to_sign: bytes) -> str:
    return hmac.new(secret_key.encode(), to_sign, hashlib.sha256).hexdigest()


def parse_date(value: str) -> datetime.datetime:
    try:
        return datetime.datetime.strptime(value, DATE_FORMAT).replace(tzinfo=datetime.UTC)
    except ValueError:
        raise errors.BadCredential("X-Sdk-Date must look like 20240131T235959Z") from None


def check_date(value: str, now: datetime.datetime) -> None:
    when = parse_date(value)
    if abs(now - when) > MAX_SKEW:
        raise errors.BadCredential(
            "the request's X-Sdk-Date is more than 15 minutes away from the server's clock")


def verify(auth: Authorization, secret_key: str, *, method: str, path: str, query: str,
           headers: Mapping[str, bytes], body: bytes, now: datetime.datetime) -> None:
    """Raise BadCredential unless `auth` is a valid signature of this request, made now."""
    missing = [h for h in auth.signed_headers if h not in headers]
    if missing:
        raise errors.BadCredential(f"signed header(s) missing from the request: "
                                   f"{', '.join(missing)}")
    date = headers[DATE_HEADER].decode("latin-1").strip()
    check_date(date, now)
    payload = body_hash(body)
    claimed = headers.get(CONTENT_HASH_HEADER)
    if claimed is not None and claimed.strip().decode("latin-1").lower() != payload:
        # UNSIGNED-PAYLOAD included: corral's bodies are JSON, which the SDKs always hash.
        raise errors.BadCredential("X-Sdk-Content-Sha256 does not match the body")
    canonical = canonical_request(method, path, query, headers, auth.signed_headers, payload)
    expected = signature(secret_key, string_to_sign(date, canonical))
    if not hmac.compare_digest(expected, auth.signature):
        raise errors.BadCredential("the request signature does not match")


def sign(access_key: str, secret_key: str, *, method: str, path: str, query: str,
         headers: Mapping[str, str], body: bytes, now: datetime.datetime) -> dict[str, str]:
    """The X-Sdk-Date and Authorization headers for a request (corral's own client).

    `headers` must hold every header to sign, Host included.
    """
    date = now.astimezone(datetime.UTC).strftime(DATE_FORMAT)
    all_headers = {k.lower(): v.encode() for k, v in headers.items()}
    all_headers[DATE_HEADER] = date.encode()
    signed = tuple(sorted(all_headers))
    canonical = canonical_request(method, path, query, all_headers, signed, body_hash(body))
    sig = signature(secret_key, string_to_sign(date, canonical))
    return {"X-Sdk-Date": date,
            "Authorization": f"{ALGORITHM} Access={access_key}, "
                             f"SignedHeaders={';'.join(signed)}, Signature={sig}"}
