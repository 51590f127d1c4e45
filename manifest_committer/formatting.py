"""Sizes and counts as people read them, for every command's output (the CLI, status, commit, reports)."""

from __future__ import annotations

_KIB = 1024


def format_bytes(size: int) -> str:
    """``512 bytes``; ``2.9 KiB (3,010 bytes)``: the readable size and the exact count, which people compare."""
    if abs(size) < _KIB:
        return f"{size:,} bytes"
    value, unit = float(size), "bytes"
    for unit in ("KiB", "MiB", "GiB", "TiB", "PiB"):  # noqa: B007 - the last unit reached is the one printed
        value /= _KIB
        if abs(value) < _KIB:
            break
    return f"{value:,.1f} {unit} ({size:,} bytes)"


def format_millis(millis: float) -> str:
    """A duration in milliseconds: ``13 ms``, ``1.5 ms``, ``2.35 s``, ``3 min 4.0 s``."""
    if millis < 10:
        return f"{millis:.1f} ms" if millis != int(millis) else f"{int(millis)} ms"
    if millis < 1000:
        return f"{millis:.0f} ms"
    seconds = millis / 1000
    if seconds < 60:
        return f"{seconds:.2f} s"
    minutes, rest = divmod(seconds, 60)
    return f"{int(minutes)} min {rest:.1f} s"
