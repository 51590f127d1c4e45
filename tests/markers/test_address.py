"""Where the marker server listens and what it publishes: the configured address, else this host's primary
address (a real socket decides what can be bound), and the Spark helper's driver host."""

from __future__ import annotations

import socket
from types import SimpleNamespace

import pytest

from manifest_committer.markers import address
from manifest_committer.markers.address import bind_host, can_bind, primary_address, server_host
from manifest_committer.spark import _session_conf
from manifest_committer.spark.datasource import MARKERS_SERVER_ADDRESS_KEY, with_driver_address


def test_a_configured_address_is_used_as_it_is() -> None:
    assert server_host("127.0.0.1") == "127.0.0.1"
    assert server_host("driver.example") == "driver.example"


def test_unset_it_is_an_address_this_host_can_listen_on() -> None:
    found = server_host(None)
    assert can_bind(found)
    assert found == (primary_address() or address.LOOPBACK)


def test_without_any_usable_address_the_loopback_is_the_last_resort(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(address, "_PROBE_DESTINATIONS", ())
    monkeypatch.setattr(socket, "gethostname", lambda: "no-such-host.invalid")

    assert server_host(None) == "127.0.0.1"
    assert "listens on 127.0.0.1 (set mapreduce.manifest.committer.markers.server.address)" in caplog.text


def test_an_address_this_host_cannot_bind_is_listened_for_on_every_interface() -> None:
    assert bind_host("127.0.0.1") == "127.0.0.1"
    assert bind_host("192.0.2.200") == "0.0.0.0", "TEST-NET-1 is no address of this host (a NAT's, say)"


def test_the_spark_helper_passes_the_drivers_host_unless_an_address_is_set() -> None:
    def session(conf: dict[str, str]) -> object:
        return SimpleNamespace(conf=SimpleNamespace(getAll=conf))

    assert _session_conf(session({"spark.driver.host": "10.1.2.3"})) == {  # type: ignore[arg-type]
        MARKERS_SERVER_ADDRESS_KEY: "10.1.2.3"
    }
    chosen = {"spark.hadoop." + MARKERS_SERVER_ADDRESS_KEY: "10.9.9.9", "spark.driver.host": "10.1.2.3"}
    assert _session_conf(session(chosen)) == {"spark.hadoop." + MARKERS_SERVER_ADDRESS_KEY: "10.9.9.9"}  # type: ignore[arg-type]
    assert with_driver_address({}, None) == {}
