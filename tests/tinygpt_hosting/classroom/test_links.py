"""The class's links (issue 25): which address students' phones get, in the order the issue
names, and never a loopback address without the warning."""

from __future__ import annotations

import pytest

from tinygpt_hosting.classroom import links

PUBLIC = "https://tinygpt.school.example/app"
LAN_PAGE = "http://192.168.1.20:8501/Softmax_and_sampling"
LOCAL_PAGE = "http://localhost:8501/Class"
NETWORK = "http://10.0.0.7:8501"


@pytest.mark.parametrize("url", [
    "http://localhost:8501/", "http://LOCALHOST/", "http://app.localhost:8501/",
    "http://127.0.0.1:8501/", "http://127.8.9.1/", "http://[::1]:8501/", "http://0.0.0.0:8501/",
    "http://localhost./",
])
def test_loopback_addresses(url):
    assert links.is_loopback(url)


@pytest.mark.parametrize("url", [
    "http://192.168.1.20:8501/", "http://10.0.0.7/", "https://tinygpt.school.example/",
    "http://[fe80::1]:8501/", "http://my-laptop.local:8501/",
])
def test_addresses_other_machines_may_reach(url):
    assert not links.is_loopback(url)


def test_the_public_address_comes_first_and_keeps_its_path():
    chosen = links.choose_address(PUBLIC, LAN_PAGE, NETWORK)
    assert (chosen.source, chosen.note, chosen.warning) == ("public", None, False)
    assert links.join_link(chosen, "K7M") == f"{PUBLIC}/Class?class=K7M"
    assert links.join_link(links.choose_address(PUBLIC + "/", None, None), "K7M") \
        == f"{PUBLIC}/Class?class=K7M"


def test_then_the_teachers_own_address_when_phones_can_reach_it():
    chosen = links.choose_address(None, LAN_PAGE, NETWORK)
    assert (chosen.source, chosen.note) == ("browser", None)
    assert links.join_link(chosen, "K7M") == "http://192.168.1.20:8501/Class?class=K7M"
    behind_a_path = links.choose_address(None, "https://host.example/tiny/Attention?x=1", None)
    assert behind_a_path.base == "https://host.example/tiny/"


def test_then_the_network_address_with_a_note_to_check_it_on_a_phone():
    chosen = links.choose_address(None, LOCAL_PAGE, NETWORK)
    assert chosen.source == "network" and not chosen.warning
    assert "on a phone" in chosen.note and "hotspot" in chosen.note
    assert links.join_link(chosen, "K7M") == "http://10.0.0.7:8501/Class?class=K7M"


@pytest.mark.parametrize("network", [None, "", "http://127.0.0.1:8501"])
def test_otherwise_the_loopback_link_with_a_plain_warning(network):
    chosen = links.choose_address(None, LOCAL_PAGE, network)
    assert chosen.source == "loopback" and chosen.warning
    assert links.join_link(chosen, "K7M") == "http://localhost:8501/Class?class=K7M"
    assert "Phones cannot open this link" in chosen.note
    assert "TINYGPT_PUBLIC_URL" in chosen.note and links.DOCS in chosen.note


def test_no_address_at_all_is_localhost_with_the_warning():
    chosen = links.choose_address(None, None, None)
    assert chosen.base == "http://localhost:8501/" and chosen.warning


def test_the_teacher_link_holds_the_secret_and_the_join_link_does_not():
    chosen = links.choose_address(PUBLIC, None, None)
    assert links.teacher_link(chosen, "K7M", "s3cr3t") == \
        f"{PUBLIC}/Class?class=K7M&teacher=s3cr3t"
    assert "s3cr3t" not in links.join_link(chosen, "K7M")


def test_a_host_in_the_warning_renders_as_text():
    note = links.unreachable_note("[x](http://e)")
    assert "\\[x\\]\\(http" in note
