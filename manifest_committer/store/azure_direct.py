"""The two hot requests of an Azure rename, the pinned conditional copy and the pinned delete, as direct REST
requests on the SDK client's own HTTP session: the same promises as through the SDK, at a third of its CPU.

Through the SDK, a rename builds two ``BlobClient`` objects and passes each request through about fifteen pipeline
policies (most of the client's CPU a request); here a request is its URL, its headers and a signature, sent
through the aiohttp session of the service client's transport, with the transport's TLS settings and timeouts.

- Copy Blob (``PUT``, ``x-ms-copy-source``) with ``If-None-Match: *`` (nothing at the destination is ever
  replaced) and ``x-ms-source-if-match`` (the source version the manifest names): the answer's
  ``x-ms-copy-status`` says whether the copy is done (``success``) or still ``pending`` (real Azure, large
  blobs), which the caller waits out before anything is deleted.
- Delete Blob (``DELETE``) with ``If-Match``: only the version copied.

Authorisation is the service client's own: its account key (Shared Key, signed here as Microsoft documents it:
https://learn.microsoft.com/rest/api/storageservices/authorize-with-shared-key) or its SAS token (in the query).
Any other credential (a token credential of Entra ID), a client with proxies of its own, or a transport that is
not aiohttp keeps every request on the SDK path. Answers become azure-core's errors, with the status and the
service's error code, so that the store judges them exactly as the SDK's.
"""

from __future__ import annotations

import base64
import email.utils
import hashlib
import hmac
import ssl
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

_SIGNED_STANDARD_HEADERS = (
    "content-encoding",
    "content-language",
    "content-length",
    "content-md5",
    "content-type",
    "date",
    "if-modified-since",
    "if-match",
    "if-none-match",
    "if-unmodified-since",
    "range",
)
"""The standard headers of a Shared Key string-to-sign, in Microsoft's order."""


@dataclass(frozen=True, slots=True)
class SharedKey:
    """An account name and its decoded key: signs requests with Shared Key."""

    account: str
    key: bytes

    def authorization(self, method: str, path: str, headers: dict[str, str]) -> str:
        """The ``Authorization`` header of a request without query parameters; ``headers`` in lower case, with
        every ``x-ms-`` header the request carries (none of whose names holds anything but ``a-z`` and ``-``, so
        that sorting them is Azure's header collation)."""
        lines = [method, *(headers.get(name, "") for name in _SIGNED_STANDARD_HEADERS)]
        canonical = "".join(f"{name}:{headers[name]}\n" for name in sorted(headers) if name.startswith("x-ms-"))
        to_sign = "\n".join(lines) + "\n" + canonical + f"/{self.account}{path}"
        signature = hmac.new(self.key, to_sign.encode("utf-8"), hashlib.sha256).digest()
        return f"SharedKey {self.account}:{base64.b64encode(signature).decode('ascii')}"


@dataclass(frozen=True, slots=True)
class Answer:
    """What the service answered: its status, error code (``x-ms-error-code``), copy status and copy id."""

    status: int
    error_code: str | None
    copy_status: str | None
    copy_id: str | None = None
    """``x-ms-copy-id``: names this copy among any other into the same blob (a failed one is removed by it)."""


class _HttpDate:
    """RFC 1123 dates for ``x-ms-date``, formatted once a second."""

    def __init__(self) -> None:
        self._second = -1
        self._text = ""

    def now(self) -> str:
        second = int(time.time())
        if second != self._second:
            self._second, self._text = second, email.utils.formatdate(second, usegmt=True)
        return self._text


class DirectBlobRequests:
    """Copy and delete requests on one service client's account, signed as the client signs, on its session."""

    def __init__(self, transport: Any, base_url: str, api_version: str, key: SharedKey | None, sas: str) -> None:
        self._transport = transport
        self._base = base_url.rstrip("/")
        self._base_path = urlsplit(self._base).path
        self._version = api_version
        self._key = key
        self._sas = sas
        self._date = _HttpDate()
        config = transport.connection_config
        self._ssl = _ssl_setting(config.verify, config.cert)
        self._timeout: Any = None
        self._timeouts = (config.timeout, config.read_timeout)

    @classmethod
    def of(cls, service_client: Any) -> DirectBlobRequests | None:
        """The direct requests of an azure-storage-blob ``BlobServiceClient`` (async), or ``None`` where its
        credential, proxies or transport are not ones this module reproduces exactly."""
        transport = getattr(getattr(service_client, "_pipeline", None), "_transport", None)
        config = getattr(service_client, "_config", None)
        base, _, query = str(getattr(service_client, "url", "")).partition("?")
        api_version = getattr(service_client, "api_version", None)
        if (
            transport is None
            or not hasattr(transport, "session")
            or not hasattr(transport, "connection_config")
            or getattr(getattr(config, "proxy_policy", None), "proxies", None)
            or not base
            or not isinstance(api_version, str)
        ):
            return None
        authorisation = _authorisation(getattr(service_client, "credential", None), query)
        if authorisation is None:
            return None
        key, sas = authorisation
        return cls(transport, base, api_version, key, sas)

    def blob_url(self, container: str, blob: str) -> str:
        """A blob's URL without query, encoded as the SDK's ``BlobClient.url``."""
        return f"{self._base}/{quote(container)}/{quote(blob, safe='~/')}"

    async def copy(self, container: str, blob: str, source_url: str, source_etag: str) -> Answer:
        """Copy Blob to ``container/blob`` from ``source_url`` only if nothing is there and the source is at
        ``source_etag`` (quoted, as the service sends it)."""
        source = f"{source_url}?{self._sas}" if self._sas else source_url
        headers = {"if-none-match": "*", "x-ms-copy-source": source, "x-ms-source-if-match": source_etag}
        return await self._send("PUT", container, blob, headers)

    async def delete(self, container: str, blob: str, etag: str) -> Answer:
        """Delete Blob ``container/blob`` only if it is still at ``etag``."""
        return await self._send("DELETE", container, blob, {"if-match": etag})

    async def _send(self, method: str, container: str, blob: str, headers: dict[str, str]) -> Answer:
        import aiohttp
        from yarl import URL

        session = self._transport.session
        if session is None:  # the SDK opens its transport at its first request: open it as it would
            await self._transport.open()
            session = self._transport.session
        if self._timeout is None:
            self._timeout = aiohttp.ClientTimeout(sock_connect=self._timeouts[0], sock_read=self._timeouts[1])
        url = URL(self.blob_url(container, blob))  # aiohttp's form of the URL, which the SDK signs and sends
        headers["x-ms-date"] = self._date.now()
        headers["x-ms-version"] = self._version
        if self._key is not None:
            headers["authorization"] = self._key.authorization(method, url.raw_path, headers)
        else:
            url = URL(f"{url}?{self._sas}", encoded=True)
        async with session.request(
            method,
            url,
            headers=headers,
            skip_auto_headers=("Content-Type",),
            allow_redirects=False,
            timeout=self._timeout,
            ssl=self._ssl,
        ) as response:
            await response.read()
            return Answer(
                response.status,
                response.headers.get("x-ms-error-code"),
                response.headers.get("x-ms-copy-status"),
                response.headers.get("x-ms-copy-id"),
            )


def _authorisation(credential: Any, query: str) -> tuple[SharedKey | None, str] | None:
    """The service client's Shared Key, or its SAS query, or ``None`` for any other credential."""
    if credential is None:
        return (None, query) if "sig=" in query else None
    account, key = getattr(credential, "account_name", None), getattr(credential, "account_key", None)
    if not isinstance(account, str) or not isinstance(key, str) or query:
        return None
    try:
        return SharedKey(account, base64.b64decode(key, validate=True)), ""
    except ValueError:
        return None


def _ssl_setting(verify: Any, cert: Any) -> Any:
    """What azure-core's aiohttp transport passes as ``ssl`` for its ``connection_verify`` and ``connection_cert``."""
    if cert or verify not in (True, False):
        context = (
            ssl.create_default_context(cafile=verify) if verify not in (True, False) else ssl.create_default_context()
        )
        if cert:
            context.load_cert_chain(*cert)
        return context
    return None if verify is True else verify


def service_error(answer: Answer, what: str) -> Exception:
    """azure-core's error for an answer that is not a success, as the SDK raises it: ``ResourceNotFoundError``
    (404), ``ResourceExistsError`` (409), ``ResourceModifiedError`` (412), ``ClientAuthenticationError``
    (401, 403), else ``HttpResponseError``; each with ``status_code`` and ``error_code``."""
    from azure.core.exceptions import (
        ClientAuthenticationError,
        HttpResponseError,
        ResourceExistsError,
        ResourceModifiedError,
        ResourceNotFoundError,
    )

    kinds: dict[int, type[HttpResponseError]] = {
        401: ClientAuthenticationError,
        403: ClientAuthenticationError,
        404: ResourceNotFoundError,
        409: ResourceExistsError,
        412: ResourceModifiedError,
    }
    error: Any = kinds.get(answer.status, HttpResponseError)(
        message=f"{what}: HTTP {answer.status}\nErrorCode:{answer.error_code}"
    )
    error.status_code = answer.status
    error.error_code = answer.error_code
    result: Exception = error
    return result
