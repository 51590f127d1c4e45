"""Percent-encoded URLs as Hadoop writes them in manifests, and their decoding.

Hadoop stores paths as ``Path.toUri().toString()``: characters that are illegal in a URI path are
percent-encoded (space as ``%20``, ``%`` as ``%25``) while ``=``, ``:``, ``@`` and non-ASCII letters stay as
they are. The same rules here keep files byte-compatible and round-trip every path, odd ones included.
"""

from __future__ import annotations

import re
import unicodedata
import urllib.parse

# Characters java.net.URI accepts unescaped in a path: unreserved, punctuation, '/' and the separators below.
_PATH_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.!~*'()" + ";:@&=+$," + "/")
_ALL_SAFE = re.compile(r"[a-zA-Z0-9\-_.!~*'();:@&=+$,/]*")
"""A path of ``_PATH_SAFE`` characters only: checked in C (a task commit encodes three URLs per file)."""


# java.net.URI quotes a non-ASCII character only if Character.isSpaceChar (Zs, Zl, Zp) or isISOControl (Cc) holds;
# format, private-use and unassigned characters stay raw. Lone surrogates (Cs) cannot be encoded and raise.
_ESCAPED_CATEGORIES = frozenset({"Zs", "Zl", "Zp", "Cc", "Cs"})


def _needs_escape(char: str) -> bool:
    if char in _PATH_SAFE:
        return False
    if ord(char) < 0x80:
        return True
    return unicodedata.category(char) in _ESCAPED_CATEGORIES


def encode_path(path: str) -> str:
    """Percent-encode a decoded path the way ``java.net.URI`` does for Hadoop paths."""
    if _ALL_SAFE.fullmatch(path):
        return path
    out: list[str] = []
    for char in path:
        if _needs_escape(char):
            out.extend(f"%{byte:02X}" for byte in char.encode("utf-8"))
        else:
            out.append(char)
    return "".join(out)


def decode_path(encoded: str) -> str:
    """Decode a percent-encoded URL path; text without ``%`` is returned as is (the common, fast case)."""
    if "%" not in encoded:
        return encoded
    return urllib.parse.unquote(encoded, errors="strict")


def split_url(url: str) -> tuple[str, str, str]:
    """Split ``scheme://authority/path`` into its parts, still encoded.

    ``file:/x`` and ``file:///x`` both give ``("file", "", "/x")``; a plain path gives scheme ``""``.
    """
    colon = url.find(":")
    slash = url.find("/")
    if colon <= 0 or (0 <= slash < colon):
        return "", "", url
    scheme = url[:colon]
    rest = url[colon + 1 :]
    if rest.startswith("//"):
        rest = rest[2:]
        cut = rest.find("/")
        if cut < 0:
            return scheme, rest, "/"
        return scheme, rest[:cut], rest[cut:]
    return scheme, "", rest


def has_relative_segments(path: str) -> bool:
    """True if a decoded path holds ``.`` or ``..`` segments, which could escape a directory prefix."""
    if "/." not in path and not path.startswith("."):
        return False  # no segment starts with a dot: the common case, decided without splitting
    segments = path.split("/")
    return any(segment in (".", "..") for segment in segments)
