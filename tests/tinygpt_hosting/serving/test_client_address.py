"""tinygpt_hosting.serving.client_address: one spelling per machine."""

from __future__ import annotations

import pytest

from tinygpt_hosting.serving.client_address import (
    LOOPBACK,
    address_group,
    address_key,
    client_address,
    other_machine_key,
)


@pytest.mark.parametrize("ip", [None, object(), "127.0.0.1", "::1", "::ffff:127.0.0.1",
                                " 127.0.0.1 ", "0:0:0:0:0:0:0:1"])
def test_every_spelling_of_this_machine_is_loopback(ip):
    assert client_address(ip) == LOOPBACK == "127.0.0.1"


@pytest.mark.parametrize("ip, one", [("::ffff:10.0.0.7", "10.0.0.7"), ("10.0.0.7", "10.0.0.7"),
                                     ("2001:DB8::1", "2001:db8::1"),
                                     ("::ffff:127.0.0.9", "127.0.0.9"),
                                     ("127.0.0.2", "127.0.0.2")])
def test_other_machines_keep_their_address_in_one_spelling(ip, one):
    assert client_address(ip) == one


def test_other_loopback_addresses_are_other_clients():
    """The bench's attackers bind 127.0.0.2..: they must not count as the honest 127.0.0.1."""
    assert client_address("127.0.0.2") != client_address("::ffff:127.0.0.1")


def test_something_that_is_no_address_is_kept_short():
    assert client_address("x" * 1000) == "x" * 64


def test_an_ipv6_client_is_grouped_by_its_64_network():
    assert address_group("2001:db8:0:1::5") == address_group("2001:db8:0:1:ffff::9") \
        == "2001:db8:0:1::/64"
    assert address_group("2001:db8:0:2::5") != address_group("2001:db8:0:1::5")
    assert address_group("10.0.0.7") == "10.0.0.7"
    assert address_group("not an address") == "not an address"


def test_the_caps_per_address_leave_this_machine_alone():
    from tinygpt_hosting.serving.client_address import other_machine

    assert other_machine(None) is None and other_machine("::ffff:127.0.0.1") is None
    assert other_machine("127.0.0.2") == "127.0.0.2"
    assert other_machine("::ffff:10.1.2.3") == "10.1.2.3"


@pytest.mark.parametrize("ip, key", [("2001:db8::1", "2001:db8::/64"),
                                     ("2001:DB8:0:0:ffff:1:2:3", "2001:db8::/64"),
                                     ("2001:db8::/64", "2001:db8::/64"),  # a key is its own key
                                     ("::ffff:10.0.0.7", "10.0.0.7"), ("10.0.0.7", "10.0.0.7"),
                                     ("::1", LOOPBACK), (None, LOOPBACK)])
def test_one_key_per_address_group(ip, key):
    assert address_key(ip) == key


def test_this_machine_has_no_key_for_the_caps():
    assert other_machine_key(None) is None and other_machine_key("::1") is None
    assert other_machine_key("2001:db8::7") == "2001:db8::/64"
