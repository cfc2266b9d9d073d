"""The Python packages a job asks for (`algorithm.engine.requirements`), and the key of the
environment that holds them.

A request is a list of requirement strings as pip reads them (`six`, `numpy>=1.24,<3`,
`requests[socks]; python_version >= "3.9"`). Only packages by name from the package index
are taken: an option (`-e`, `--index-url`, `-r file`) or a direct reference
(`pkg @ https://...`, a local path) would let a job make the server's installer read files
or reach places of its choosing, so it is refused. Two requests that differ only in
spelling (case, `-` or `_`, order, repeats) are one request, and share one environment.
"""

from __future__ import annotations

import hashlib
import json

from packaging import requirements as pkg_requirements
from packaging import utils as pkg_utils

#: the most requirement strings a job may list
MAX_REQUIREMENTS = 200
#: the longest requirement string
MAX_LENGTH = 512
#: hex digits of an environment's key (its folder's name)
KEY_LENGTH = 16


def normalize(requirements: list[str]) -> list[str]:
    """The request in one spelling (sorted, names canonical, no repeats); ValueError, with
    the offending entry, for anything that is not a named requirement."""
    if len(requirements) > MAX_REQUIREMENTS:
        raise ValueError(f"at most {MAX_REQUIREMENTS} requirements")
    out: set[str] = set()
    for raw in requirements:
        if not isinstance(raw, str):
            raise ValueError("each requirement must be a string")
        text = raw.strip()
        if not text or len(text) > MAX_LENGTH or any(c in text for c in "\r\n\0"):
            raise ValueError(f"requirement {raw!r}: one line of at most {MAX_LENGTH} "
                             "characters")
        if text.startswith("-"):
            raise ValueError(f"requirement {raw!r}: installer options are not taken; "
                             "list packages by name (the server's package index is used)")
        try:
            req = pkg_requirements.Requirement(text)
        except pkg_requirements.InvalidRequirement as exc:
            raise ValueError(f"requirement {raw!r} is not valid: {exc}") from None
        if req.url:
            raise ValueError(f"requirement {raw!r}: a direct reference (URL or path) is "
                             "not taken; name a package of the package index")
        out.add(_spelled(req))
    return sorted(out)


def _spelled(req: pkg_requirements.Requirement) -> str:
    extras = f"[{','.join(sorted(pkg_utils.canonicalize_name(e) for e in req.extras))}]" \
        if req.extras else ""
    marker = f"; {req.marker}" if req.marker else ""
    return f"{pkg_utils.canonicalize_name(req.name)}{extras}{req.specifier}{marker}"


def key(requirements: list[str], python: str, version: str) -> str:
    """The environment's key: a hash of the normalized request and the base interpreter
    (its path and its version), so that a new interpreter gets environments of its own."""
    doc = json.dumps({"requirements": normalize(requirements), "python": python,
                      "version": version}, sort_keys=True)
    return hashlib.sha256(doc.encode()).hexdigest()[:KEY_LENGTH]
