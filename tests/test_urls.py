"""Percent-encoding of paths exactly as java.net.URI (and so Hadoop's Path.toUri) writes them."""

from __future__ import annotations

import pytest

from manifest_committer.urls import decode_path, encode_path, has_relative_segments, split_url

ODD_PATHS = [
    "/plain/path/file.parquet",
    "/out put/year=2024/f%1.parquet",
    "/a b/c%d/e=f/g#h/i?j",
    "/literal/%20/not/a/space",
    "/already%2Fencoded-looking",
    "/ünïcödé/日本語/emoji-🎉",
    "/tab\there/new\nline",
    '/brackets[0]/{braces}/<angles>/pipe|/back\\slash/quote"/caret^/`tick`',
    "/sub-delims/k+l;m:n@o&p$q,r!s~t*u'v(w)",
    "/non-breaking\u00a0space",
    "",
    "%",
]


@pytest.mark.parametrize("path", ODD_PATHS)
def test_decode_inverts_encode(path: str) -> None:
    encoded = encode_path(path)
    assert decode_path(encoded) == path
    assert " " not in encoded and "#" not in encoded and "?" not in encoded


@pytest.mark.parametrize(
    ("path", "encoded"),
    [
        ("/out put/year=2024/f%1.parquet", "/out%20put/year=2024/f%251.parquet"),  # verified against Hadoop
        ("/a#b", "/a%23b"),
        ("/a?b", "/a%3Fb"),
        ("/k=v/x+y;z:w@h&i$j,k", "/k=v/x+y;z:w@h&i$j,k"),
        ("/é/ü", "/é/ü"),
        ("/tab\t", "/tab%09"),
        ("/nbsp\u00a0", "/nbsp%C2%A0"),
        ("/[x]{y}", "/%5Bx%5D%7By%7D"),
        ('/"<>|\\^`', "/%22%3C%3E%7C%5C%5E%60"),
        ("/-_.!~*'()", "/-_.!~*'()"),
        ("/zero\u200dwidth", "/zero\u200dwidth"),  # a format character is "other": java.net.URI keeps it
        ("/ctl\u0085", "/ctl%C2%85"),  # a C1 control is quoted
    ],
)
def test_java_uri_compatible_encoding(path: str, encoded: str) -> None:
    assert encode_path(path) == encoded


def test_invalid_utf8_escapes_are_value_errors() -> None:
    with pytest.raises(ValueError):
        decode_path("/a%FFb")


def test_decoding_accepts_lower_case_escapes_and_multibyte_sequences() -> None:
    assert decode_path("/a%2fb%c3%a9") == "/a/bé"
    assert decode_path("/%E6%97%A5") == "/日"
    assert decode_path("/a+b") == "/a+b", "a plus is not a space in a path"


@pytest.mark.parametrize(
    ("url", "parts"),
    [
        ("file:/data/out", ("file", "", "/data/out")),
        ("file:///data/out", ("file", "", "/data/out")),
        ("file://localhost/data/out", ("file", "localhost", "/data/out")),
        ("abfs://c@acct.dfs.core.windows.net/w/x%20y", ("abfs", "c@acct.dfs.core.windows.net", "/w/x%20y")),
        ("gs://bucket", ("gs", "bucket", "/")),
        ("memory:///t/out", ("memory", "", "/t/out")),
        ("/plain/path", ("", "", "/plain/path")),
        ("relative/a:b", ("", "", "relative/a:b")),
    ],
)
def test_split_url(url: str, parts: tuple[str, str, str]) -> None:
    assert split_url(url) == parts


@pytest.mark.parametrize(
    ("path", "relative"),
    [
        ("/a/../b", True),
        ("/a/./b", True),
        ("..", True),
        ("/a/b/..", True),
        ("/a/..b/c.", False),
        ("/a/.hidden/...", False),
        ("/a/b", False),
    ],
)
def test_relative_segments(path: str, relative: bool) -> None:
    assert has_relative_segments(path) is relative


def test_the_all_safe_fast_path_agrees_with_the_character_rule() -> None:
    """``encode_path`` returns a path unchanged only when every character is safe (the check is a regex now)."""
    from manifest_committer.urls import _PATH_SAFE

    for code in range(0x300):
        char = chr(code)
        for path in (char, f"dt=1/{char}x", f"{char}{char}"):
            if code < 0xD800 and all(c in _PATH_SAFE for c in path):
                assert encode_path(path) is path
            elif code < 0x80:
                assert encode_path(path) != path, repr(path)
