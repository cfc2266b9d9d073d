"""The server key, and what corral does with it: encrypt secret keys, hash tokens.

A signature can only be checked with the secret key itself, so secret keys are stored
encrypted (Fernet: AES-128-CBC + HMAC-SHA256) with a key that never enters the database:
`CORRAL_SERVER_KEY`, else the file `server_key_file` (default `$CORRAL_HOME/server.key`,
created with mode 0600 on first start). Bearer tokens are never needed back, so only
their SHA-256 is kept. Losing the server key makes every stored secret key useless
(tokens keep working); see the README on rotating.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import pathlib
import secrets
import string

from cryptography.fernet import Fernet, InvalidToken

from corral import settings as settings_mod
from corral.domain import errors

log = logging.getLogger(__name__)
_AK_ALPHABET = string.ascii_uppercase + string.digits
_SK_ALPHABET = string.ascii_letters + string.digits
TOKEN_PREFIX = "crl_"


class SecretBox:
    def __init__(self, key: bytes) -> None:
        try:
            self._fernet = Fernet(key)
        except (ValueError, TypeError):
            raise errors.CorralError(
                "the server key is not a valid key (32 url-safe base64-encoded bytes, as "
                "`python -c 'from cryptography.fernet import Fernet; "
                "print(Fernet.generate_key().decode())'` prints)") from None
        # A key of its own for signed links, derived from the server key: every server
        # of a deployment shares that, so a link one made opens on any other.
        self._link_key = hmac.new(key, b"corral signed links", hashlib.sha256).digest()

    def sign_link(self, message: str) -> str:
        """The signature of a link's `message` (api/loglinks.py), hex."""
        return hmac.new(self._link_key, message.encode(), hashlib.sha256).hexdigest()

    def link_signed(self, message: str, signature: str) -> bool:
        return hmac.compare_digest(self.sign_link(message), signature.lower())

    def encrypt(self, secret: str) -> str:
        return self._fernet.encrypt(secret.encode()).decode()

    def decrypt(self, sealed: str) -> str:
        try:
            return self._fernet.decrypt(sealed.encode()).decode()
        except InvalidToken:
            # Say it to the operator (who changed the server key?), not to the caller.
            log.warning("a stored secret key cannot be decrypted with this server key")
            raise errors.BadCredential("the access key is unknown or revoked") from None


def load(settings: settings_mod.Settings) -> SecretBox:
    """The server key from the setting, else its file (made on first use, mode 0600)."""
    if settings.server_key is not None:
        return SecretBox(settings.server_key.get_secret_value().encode())
    path = settings.key_file
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass  # made by someone else just now: read theirs
        else:
            with os.fdopen(fd, "wb") as fh:
                fh.write(Fernet.generate_key() + b"\n")
    _check_private(path)
    return SecretBox(path.read_bytes().strip())


def _check_private(path: pathlib.Path) -> None:
    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        raise errors.CorralError(
            f"the server key file {path} can be read by others (mode {mode:o}); "
            f"chmod 600 it")


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_access_key() -> str:
    return "".join(secrets.choice(_AK_ALPHABET) for _ in range(20))


def new_secret_key() -> str:
    return "".join(secrets.choice(_SK_ALPHABET) for _ in range(40))


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)
