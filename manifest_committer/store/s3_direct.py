"""The job commit's hot S3 request, ``CompleteMultipartUpload`` with ``If-None-Match: *``, built and signed here and
sent through the SDK's own HTTP session, without the rest of botocore's pipeline.

botocore spends about a millisecond of CPU on one completion: endpoint rules, the serializer, the event system,
the response parser. Here the request is the one botocore sent for the first completion of the bucket, with the
key, upload id and parts changed: the same URL prefix (endpoint, addressing style), the same signing region, the
same headers. It is signed with botocore's public signer (``S3SigV4Auth``) and the client's own credentials, and
sent through the client's HTTP session (its TLS settings, timeouts, connection pool and proxies); errors are
botocore's and s3fs's, as on the SDK path.

A bucket's route is learned from that first request, which goes through the SDK (``observe``); where it had any
header this module does not send itself (a security token of S3 Express, checksums, a requester-pays or an
expected-owner header from ``s3_additional_kwargs``), or no SigV4 authorisation, or the key is not at the end of
its path, the bucket has no route and every completion keeps the SDK path. An answer that is not a plain success
becomes the error s3fs raises for it, for the store's one-by-one path to settle, as any failed completion is.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit
from xml.etree import ElementTree
from xml.sax.saxutils import escape

from .pending_upload import PendingUpload

log = logging.getLogger(__name__)

_NAMESPACE = "http://s3.amazonaws.com/doc/2006-03-01/"
_SIGV4_SCOPE = re.compile(
    r"^AWS4-HMAC-SHA256 Credential=[^/]+/\d{8}/(?P<region>[^/]+)/(?P<service>[^/]+)/aws4_request,"
)
_SENT_HERE = frozenset(
    {
        "authorization",
        "content-length",
        "host",
        "if-none-match",
        "user-agent",
        "x-amz-content-sha256",
        "x-amz-date",
        "x-amz-security-token",
        "x-amz-mp-object-size",
        "amz-sdk-invocation-id",
        "amz-sdk-request",
        "expect",
    }
)
"""Headers of the SDK's completion that this module sends too (or that carry nothing of the request's meaning)."""


@dataclass(frozen=True, slots=True)
class Route:
    """Where the completions of one bucket go, and under which region they are signed."""

    prefix: str
    """The URL before the key, e.g. ``https://bucket.s3.eu-west-1.amazonaws.com/`` or ``http://host:port/bucket/``."""
    region: str
    service: str


def encoded_key(key: str) -> str:
    """A key as botocore puts it in a URL path (``percent_encode(key, safe="/~")``)."""
    return quote(key, safe="/~")


def route_of(url: str, headers: dict[str, str], key: str) -> Route | None:
    """The route that the SDK's completion of ``key`` at ``url`` with ``headers`` shows; ``None`` where this module
    could not send the same request."""
    lower = {name.lower(): value for name, value in headers.items()}
    extra = sorted(set(lower) - _SENT_HERE)
    if extra:
        log.debug("S3 completions keep the SDK path: its request has headers %s", extra)
        return None
    scope = _SIGV4_SCOPE.match(lower.get("authorization", ""))
    path = urlsplit(url)
    suffix = "/" + encoded_key(key)
    if scope is None or not path.path.endswith(suffix) or set(parse_qs(path.query)) != {"uploadId"}:
        log.debug("S3 completions keep the SDK path: not a SigV4 request of the key's path (%s)", url)
        return None
    prefix = url.split("?", 1)[0][: -len(suffix) + 1]
    return Route(prefix, scope["region"], scope["service"])


def completion_body(pending: PendingUpload) -> bytes:
    """The XML body of ``pending``'s completion, as botocore serializes it."""
    parts = "".join(
        f"<Part><PartNumber>{number}</PartNumber><ETag>{escape(etag)}</ETag></Part>"
        for number, etag in enumerate(pending.etags, start=1)
    )
    return f'<CompleteMultipartUpload xmlns="{_NAMESPACE}">{parts}</CompleteMultipartUpload>'.encode()


def completion_url(route: Route, pending: PendingUpload) -> str:
    assert pending.upload_id is not None
    return f"{route.prefix}{encoded_key(pending.key)}?uploadId={quote(pending.upload_id, safe='~')}"


class CompletionAnswerError(Exception):
    """An answer that is neither a completion nor an S3 error document."""


def parse_answer(status: int, body: bytes) -> str | dict[str, str]:
    """The new object's ETag of a successful completion, or the fields of the S3 error it answered with.

    S3 may answer 200 with an error document when a completion fails after its answer began; botocore then
    reports a 500 (``InternalError`` or the code given), and so does this.
    """
    try:
        root = ElementTree.fromstring(body) if body.strip() else None
    except ElementTree.ParseError as error:
        if status != 200:  # an error page of a server or proxy: botocore names the error by its status
            return {"Code": str(status), "Message": f"HTTP {status} with a body that is not XML"}
        raise CompletionAnswerError(f"HTTP {status} with a body that is not XML: {body[:200]!r}") from error
    tag = "" if root is None else root.tag.rsplit("}", 1)[-1]
    if status == 200 and tag == "CompleteMultipartUploadResult" and root is not None:
        etag = root.findtext(f"{{{_NAMESPACE}}}ETag") or root.findtext("ETag")
        if etag is None:
            raise CompletionAnswerError("HTTP 200 without the new object's ETag")
        return etag.strip('"')
    if tag == "Error" and root is not None:
        return {child.tag.rsplit("}", 1)[-1]: (child.text or "") for child in root}
    if status == 200:
        raise CompletionAnswerError(f"HTTP 200 with an unexpected answer: {body[:200]!r}")
    return {"Code": str(status), "Message": f"HTTP {status}"}


def client_error(fields: dict[str, str], status: int, operation: str = "CompleteMultipartUpload") -> Exception:
    """The error s3fs raises for an S3 error answer of ``operation`` (``translate_boto_error`` of botocore's
    ``ClientError``)."""
    from botocore.exceptions import ClientError
    from s3fs.errors import translate_boto_error

    if status == 200:  # an error inside a 200 answer: botocore's _handle_200_error makes it a 500
        status = 500
    fields.setdefault("Message", "")
    error = ClientError({"Error": fields, "ResponseMetadata": {"HTTPStatusCode": status}}, operation)
    translated: Exception = translate_boto_error(error)
    return translated


def signed_request(route: Route, credentials: Any, pending: PendingUpload, object_size: bool) -> Any:
    """The prepared, signed completion of ``pending`` (an ``AWSPreparedRequest`` for the SDK's HTTP session)."""
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest

    headers = {"If-None-Match": "*"}
    if object_size:
        headers["x-amz-mp-object-size"] = str(pending.length)
    request = AWSRequest("POST", completion_url(route, pending), data=completion_body(pending), headers=headers)
    S3SigV4Auth(credentials, route.service, route.region).add_auth(request)
    return request.prepare()
