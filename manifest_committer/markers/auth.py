"""The marker server's authentication: every request, and every answer, proves it holds the job's secret.

The secret is created at ``setup_job`` and kept in the job's state (``markers/secret``, on local disk readable by
its owner only); ``server.json`` publishes where the server listens, never the secret. A request carries
``Authorization: MC-HMAC-SHA256 <nonce>:<mac>``, the HMAC of the method, path, a fresh nonce and the body's
digest under the secret; an answer carries ``X-Marker-Proof``, the HMAC of that nonce, the status and the
answer's body. So the secret never crosses the network, a request without it is refused (401) before anything
is recorded, and a task pointed at another host by a crafted ``server.json`` learns that the host does not hold
the secret (it then writes direct markers) instead of trusting its answers. Every comparison is constant-time
(``hmac.compare_digest``). A replayed request can only repeat a marker the job's own task sent, which is
idempotent.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

SCHEME = "MC-HMAC-SHA256"
AUTHORIZATION = "Authorization"
PROOF = "X-Marker-Proof"
SECRET_BYTES = 32
_NONCE_BYTES = 16
_MAX_NONCE_LENGTH = 64
_DOMAIN = b"manifest-committer-markers/1"


def new_secret() -> str:
    """A fresh secret of 256 bits, as 64 hex digits."""
    return secrets.token_hex(SECRET_BYTES)


def parse_secret(data: bytes) -> str | None:
    """The secret a ``secret`` file holds, or ``None`` if it holds anything else."""
    text = data.decode("ascii", errors="replace").strip()
    if len(text) != 2 * SECRET_BYTES or any(c not in "0123456789abcdef" for c in text):
        return None
    return text


def _mac(secret: str, *parts: bytes) -> str:
    return hmac.new(secret.encode("ascii"), b"\n".join((_DOMAIN, *parts)), hashlib.sha256).hexdigest()


def authorization(secret: str, method: str, path: str, body: bytes) -> tuple[str, str]:
    """The nonce of a new request and its ``Authorization`` header value."""
    nonce = secrets.token_hex(_NONCE_BYTES)
    mac = _mac(secret, b"request", method.encode("ascii"), path.encode("ascii"), nonce.encode(), _digest(body))
    return nonce, f"{SCHEME} {nonce}:{mac}"


def check_authorization(secret: str, header: str | None, method: str, path: str, body: bytes) -> str | None:
    """The request's nonce when ``header`` proves the secret for this method, path and body, else ``None``."""
    if not header:
        return None
    scheme, _, credentials = header.partition(" ")
    nonce, _, mac = credentials.partition(":")
    if scheme != SCHEME or not nonce or len(nonce) > _MAX_NONCE_LENGTH or not nonce.isascii() or not mac.isascii():
        return None
    expected = _mac(
        secret, b"request", method.encode("ascii"), path.encode("ascii", "replace"), nonce.encode(), _digest(body)
    )
    return nonce if hmac.compare_digest(expected, mac) else None


def answer_proof(secret: str, nonce: str, status: int, body: bytes) -> str:
    """The ``X-Marker-Proof`` of an answer to the request of ``nonce``."""
    return _mac(secret, b"answer", nonce.encode(), str(status).encode(), _digest(body))


def check_answer(secret: str, nonce: str, status: int, body: bytes, proof: str | None) -> bool:
    """Whether an answer comes from a server that holds the secret."""
    if not proof or not proof.isascii():
        return False
    return hmac.compare_digest(answer_proof(secret, nonce, status, body), proof)


def _digest(body: bytes) -> bytes:
    return hashlib.sha256(body).hexdigest().encode()
