"""Where the marker server listens: an address the tasks on the cluster's other hosts can reach.

``mapreduce.manifest.committer.markers.server.address`` decides when set (``127.0.0.1`` keeps the server on
one host); the Spark helper sets it to ``spark.driver.host`` when the user did not. Unset, it is this host's
primary address: the source address the kernel picks for a route off the host, found by "connecting" a UDP
socket (no packet is sent), else the address the host name resolves to; each candidate is used only if a socket
can bind it, and ``127.0.0.1`` is the last resort (with a warning: other hosts cannot reach it). The server
binds the address, or every interface where this host cannot bind it (a NAT or container address), and
publishes it.
"""

from __future__ import annotations

import logging
import socket

log = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"
_PROBE_DESTINATIONS = (("10.255.255.255", 9), ("172.31.255.255", 9), ("192.168.255.255", 9))
"""Private addresses nothing needs to answer: connecting a UDP socket only asks the kernel for a route."""


def can_bind(host: str) -> bool:
    """Whether a TCP socket of this host can listen on ``host`` (any free port)."""
    try:
        infos = socket.getaddrinfo(host, 0, type=socket.SOCK_STREAM)
    except OSError:
        return False
    for family, kind, protocol, _, address in infos:
        try:
            with socket.socket(family, kind, protocol) as probe:
                probe.bind(address)
                return True
        except OSError:
            continue
    return False


def primary_address() -> str | None:
    """This host's address on its route off the host, or what its name resolves to; ``None`` if neither binds."""
    for destination in _PROBE_DESTINATIONS:
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
                probe.connect(destination)
                address = str(probe.getsockname()[0])
        except OSError:
            continue
        if address not in ("0.0.0.0", "") and can_bind(address):
            return address
    try:
        address = socket.gethostbyname(socket.gethostname())
    except OSError:
        return None
    return address if can_bind(address) else None


def server_host(configured: str | None) -> str:
    """The host the marker server binds and publishes: ``configured`` if set, else this host's primary address."""
    if configured:
        return configured
    address = primary_address()
    if address is None:
        log.warning(
            "No address of this host that other hosts could reach was found; the marker server listens on %s "
            "(set mapreduce.manifest.committer.markers.server.address): tasks on other hosts write direct markers",
            LOOPBACK,
        )
        return LOOPBACK
    return address


def bind_host(published: str) -> str:
    """Where the server listens to be reached at ``published``: that address itself, or, where this host cannot
    bind it (an address a NAT or a container network maps to this host, as ``spark.driver.host`` with
    ``spark.driver.bindAddress``), every interface."""
    if can_bind(published):
        return published
    wildcard = "::" if ":" in published else "0.0.0.0"
    log.info(
        "Marker server: %s is not an address of this host; listening on %s, publishing %s",
        published,
        wildcard,
        published,
    )
    return wildcard
