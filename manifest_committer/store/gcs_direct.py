"""The two hot requests of a GCS rename, the pinned rewrite and the pinned delete, as direct JSON API requests on
gcsfs's own aiohttp session: the same requests and the same errors as through ``GCSFileSystem._call``, with less
of the client's CPU.

A request here is gcsfs's request made without its generic machinery (its debug log line formatted for every
call, the template formatting and the query built by aiohttp from a dict): the URL gcsfs builds (its endpoint,
``storage/v1``, every name quoted as gcsfs quotes it, its ``userProject`` for requester pays), the headers gcsfs
builds (``GCSFileSystem._get_headers``: its User-Agent and its credentials, refreshed as gcsfs refreshes them), its
session and ``requests_timeout``, and the answer judged by gcsfs's own ``validate_response``: 404 is
``FileNotFoundError``, 412 ``FileExistsError``, 403 ``OSError("Forbidden: ...")``, 502 ``ProxyError``, others
``HttpError`` with ``.code``, so the store and the committer's retry policy judge them exactly as before.

Only for a ``GCSFileSystem`` whose request method is gcsfs's own without its retries (``without_client_retries``),
whose URL, header and session methods are gcsfs's own: any other (a subclass or an instance that overrides one of
them, retries left on) keeps every request on gcsfs's path.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote, urlencode

_GCSFS_METHODS = ("_call", "_get_headers", "_get_params", "_format_path", "_set_session", "base")
"""The methods of ``GCSFileSystem`` whose behaviour the direct requests reproduce: none may be overridden."""


def _quote(name: str) -> str:
    """A bucket or object name in a URL path, as gcsfs quotes it (everything, ``/`` too)."""
    return quote(name, safe="")


class DirectObjectRequests:
    """The rewrite and delete of a rename on one ``GCSFileSystem``'s endpoint, session and credentials."""

    def __init__(self, fs: Any) -> None:
        self._fs = fs

    @classmethod
    def of(cls, fs: Any) -> DirectObjectRequests | None:
        """The direct requests of ``fs``, or ``None`` where its requests are not ones this module reproduces."""
        try:
            import gcsfs
        except ImportError:
            return None
        base_class = gcsfs.GCSFileSystem
        if not isinstance(fs, base_class):
            return None
        for name in _GCSFS_METHODS:
            if getattr(type(fs), name, None) is not getattr(base_class, name, None) or name in vars(fs):
                return None
        request = getattr(fs, "_request", None)
        unwrapped = getattr(base_class._request, "__wrapped__", None)
        if unwrapped is None or getattr(request, "__func__", None) is not unwrapped:
            return None  # gcsfs's retries are on (or the request method is not gcsfs's): its path retries
        return cls(fs)

    async def rewrite(
        self, source: tuple[str, str], dest: tuple[str, str], generation: str, token: str | None
    ) -> dict[str, Any]:
        """One ``rewriteTo`` call of generation ``generation`` of the source ``(bucket, key)`` to a destination
        ``(bucket, key)`` that must not exist (``ifGenerationMatch=0``); the answer (``done``, ``rewriteToken``)."""
        params = {"sourceGeneration": generation, "ifGenerationMatch": 0}
        if token is not None:
            params["rewriteToken"] = token
        contents = await self._send(
            "POST",
            "b/{}/o/{}/rewriteTo/b/{}/o/{}",
            (*source, *dest),
            params,
            {"Content-Type": "application/json"},
        )
        answer: dict[str, Any] = json.loads(contents)
        return answer

    async def delete(self, bucket: str, key: str, generation: str) -> None:
        """Delete generation ``generation`` of ``bucket/key``."""
        await self._send("DELETE", "b/{}/o/{}", (bucket, key), {"generation": generation}, None)

    async def _send(
        self,
        method: str,
        template: str,
        args: tuple[str, ...],
        params: dict[str, Any],
        headers: dict[str, str] | None,
    ) -> bytes:
        from gcsfs.retry import validate_response
        from yarl import URL

        fs = self._fs
        await fs._set_session()
        query = urlencode(fs._get_params(params), quote_via=quote)
        path = template.format(*(_quote(arg) for arg in args))
        url = URL(f"{fs.base}{path}?{query}", encoded=True)
        async with fs.session.request(
            method=method, url=url, headers=fs._get_headers(headers), timeout=fs.requests_timeout
        ) as response:
            status = response.status
            contents: bytes = await response.read()
        validate_response(status, contents, template, args)
        return contents
