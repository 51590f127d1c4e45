"""The two hot calls of a GCS rename, the pinned rewrite and the pinned delete, as direct JSON API requests on
gcsfs's own aiohttp session: the same calls and the same errors as through ``GCSFileSystem._call``, with less of
the client's CPU, and fewer HTTP requests (so is the listing of a batch's sources): calls made in the same turn of
the event loop, or while ``REQUESTS_IN_FLIGHT`` requests are in flight, go together in batch requests of up to 100
calls (https://cloud.google.com/storage/docs/batch), a call alone as a plain request. Each part of a batch answer
is judged as the call's own answer would be; a part missing is an answer lost (``ClientPayloadError``, retried
and resolved by the committer as a lost connection); a batch request that fails fails each of its calls with its
error.

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

import asyncio
import json
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

BATCH_LIMIT = 100
"""Requests a batch request holds at most (the JSON API's limit)."""
REQUESTS_IN_FLIGHT = 2
"""HTTP requests of one filesystem's direct calls in flight at once; calls made meanwhile wait and go in the next
batch. A batch costs the client a fraction of its calls sent alone, so two in flight hold the calls of every
thread of a job commit, with less CPU and wall time than more in flight."""
_BOUNDARY = "manifest-committer-batch-7d1f3a"

_GCSFS_METHODS = ("_call", "_get_headers", "_get_params", "_format_path", "_set_session", "base", "batch_url_base")
"""The methods of ``GCSFileSystem`` whose behaviour the direct requests reproduce: none may be overridden."""


def _quote(name: str) -> str:
    """A bucket or object name in a URL path, as gcsfs quotes it (everything, ``/`` too)."""
    return quote(name, safe="")


class DirectObjectRequests:
    """The rewrite, delete and listing calls of renames on one ``GCSFileSystem``'s endpoint, session and
    credentials."""

    def __init__(self, fs: Any) -> None:
        self._fs = fs
        split = urlsplit(fs.base)
        self._origin = f"{split.scheme}://{split.netloc}"
        self._base_path = split.path
        self._queue: list[_Request] = []
        self._in_flight: set[asyncio.Future[None]] = set()
        self._flush_scheduled = False

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

    async def list_objects(self, bucket: str, params: dict[str, Any]) -> dict[str, Any]:
        """A page of the listing of ``bucket`` (``objects.list`` with ``params``; ``None`` values left out)."""
        page: dict[str, Any] = json.loads(await self._send("GET", "b/{}/o", (bucket,), params, None))
        return page

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
        """One request's answer body; its error status raised as gcsfs raises it. Requests made in the same turn of
        the event loop (a batch of renames in flight) go together in batch requests of up to ``BATCH_LIMIT``."""
        from gcsfs.retry import validate_response

        fs = self._fs
        await fs._set_session()
        path = template.format(*(_quote(arg) for arg in args))
        target = f"{self._base_path}{path}?{urlencode(fs._get_params(params), quote_via=quote)}"
        request = _Request(method, target, headers, asyncio.get_running_loop().create_future())
        self._queue.append(request)
        self._schedule_flush()
        status, contents = await request.answer
        validate_response(status, contents, template, args)
        return contents

    def _schedule_flush(self) -> None:
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        """Sends what is queued, at most ``BATCH_LIMIT`` calls a request, while fewer than ``REQUESTS_IN_FLIGHT``
        requests are in flight; the rest waits for the next request to finish."""
        self._flush_scheduled = False
        while self._queue and len(self._in_flight) < REQUESTS_IN_FLIGHT:
            taken, self._queue = self._queue[:BATCH_LIMIT], self._queue[BATCH_LIMIT:]
            task = asyncio.ensure_future(self._answer(taken))
            self._in_flight.add(task)
            task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Future[None]) -> None:
        self._in_flight.discard(task)
        if self._queue:
            self._schedule_flush()

    async def _answer(self, requests: list[_Request]) -> None:
        """Sends ``requests`` (alone, or as one batch) and hands each its answer, or the error of the whole."""
        answers: list[tuple[int, bytes] | Exception]
        try:
            if len(requests) == 1:
                request = requests[0]
                answers = [await self._send_alone(request)]
            else:
                answers = await self._send_batch(requests)
        except BaseException as error:
            for request in requests:
                if not request.answer.done():
                    request.answer.set_exception(error)
            if not isinstance(error, Exception):
                raise
            return
        for request, answer in zip(requests, answers, strict=True):
            if request.answer.done():
                continue
            if isinstance(answer, Exception):
                request.answer.set_exception(answer)
            else:
                request.answer.set_result(answer)

    async def _send_alone(self, request: _Request) -> tuple[int, bytes]:
        from yarl import URL

        fs = self._fs
        url = URL(f"{self._origin}{request.target}", encoded=True)
        async with fs.session.request(
            method=request.method, url=url, headers=fs._get_headers(request.headers), timeout=fs.requests_timeout
        ) as response:
            return response.status, await response.read()

    async def _send_batch(self, requests: list[_Request]) -> list[tuple[int, bytes] | Exception]:
        """One ``multipart/mixed`` batch request (https://cloud.google.com/storage/docs/batch) of ``requests``: its
        headers (credentials) apply to every part. A part the answer lacks gets ``ClientPayloadError``: an answer
        lost, which the committer retries and resolves as it resolves a lost connection."""
        import aiohttp
        from gcsfs.retry import validate_response

        fs = self._fs
        parts = []
        for index, request in enumerate(requests):
            content_type = (request.headers or {}).get("Content-Type")
            inner_headers = f"Content-Type: {content_type}\r\n" if content_type else ""
            parts.append(
                f"--{_BOUNDARY}\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n"
                f"Content-ID: <{index}>\r\n\r\n{request.method} {request.target} HTTP/1.1\r\n{inner_headers}"
                "Content-Length: 0\r\n\r\n\r\n"
            )
        body = ("".join(parts) + f"--{_BOUNDARY}--\r\n").encode("utf-8")
        headers = fs._get_headers({"Content-Type": f'multipart/mixed; boundary="{_BOUNDARY}"'})
        async with fs.session.request(
            method="POST",
            url=fs.batch_url_base,
            params=fs._get_params({}),
            data=body,
            headers=headers,
            timeout=fs.requests_timeout,
        ) as response:
            status, contents = response.status, await response.read()
            content_type = response.headers.get("Content-Type", "")
        validate_response(status, contents, fs.batch_url_base)
        answers = _batch_answers(content_type, contents)
        return [
            answers.get(index)
            or aiohttp.ClientPayloadError(f"the batch answer has no part for {request.method} {request.target}")
            for index, request in enumerate(requests)
        ]


@dataclass(slots=True)
class _Request:
    """A request waiting for its turn in a batch, and the future of its (status, body)."""

    method: str
    target: str
    """The path below the endpoint and the query, encoded."""
    headers: dict[str, str] | None
    answer: asyncio.Future[tuple[int, bytes]]


_PART_HEAD = re.compile(rb"\r?\n\r?\n")
_RESPONSE_ID = re.compile(rb"content-id:\s*<response-(\d+)>", re.IGNORECASE)
_STATUS_LINE = re.compile(rb"\s*HTTP/[0-9.]+ (\d{3})")


def _batch_answers(content_type: str, contents: bytes) -> dict[int, tuple[int, bytes]]:
    """Each part of a batch answer by the index of its request (``Content-ID: <response-N>``): its status and body;
    parts that do not parse are left out."""
    boundary = next(
        (
            value.strip().strip('"')
            for name, _, value in (item.strip().partition("=") for item in content_type.split(";"))
            if name.lower() == "boundary"
        ),
        None,
    )
    if not boundary:
        return {}
    answers: dict[int, tuple[int, bytes]] = {}
    for part in contents.split(b"--" + boundary.encode("ascii"))[1:]:
        if part.startswith(b"--"):
            break
        sections = _PART_HEAD.split(part, maxsplit=2)
        if len(sections) < 2:
            continue
        index, status = _RESPONSE_ID.search(sections[0]), _STATUS_LINE.match(sections[1])
        if index is None or status is None:
            continue
        body = sections[2].strip() if len(sections) > 2 else b""
        answers[int(index.group(1))] = (int(status.group(1)), body)
    return answers
