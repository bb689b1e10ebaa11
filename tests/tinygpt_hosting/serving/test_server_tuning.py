"""Streamlit's config sections, kept between reruns (tinygpt_hosting.serving.server_tuning): the
same answers as Streamlit's own scan, a fresh copy each time, and forgotten when the config is
parsed again; every test restores what it patched, and a Streamlit without the names it needs
leaves everything as it was."""

from __future__ import annotations

import pytest
from streamlit import config
from streamlit.proto.NewSession_pb2 import Config, CustomThemeConfig
from streamlit.runtime import app_session

from tinygpt_hosting import streamlit_internals
from tinygpt_hosting.serving import server_tuning


def stop_keeping() -> None:
    """Undo keep_config_sections (what a test patches, it restores): the undo
    streamlit_internals.patch_config_reads returned, and the answers kept forgotten."""
    with server_tuning._lock:
        if server_tuning._undo is not None:
            server_tuning._undo()
            server_tuning._undo = None
        server_tuning._forget()

ORIGINALS = (config.get_options_for_section, app_session._populate_theme_msg,
             app_session._populate_config_msg)


def originals() -> tuple:
    return (config.get_options_for_section, app_session._populate_theme_msg,
            app_session._populate_config_msg)


@pytest.fixture(autouse=True)
def restored():
    """Each test starts from Streamlit's own functions and leaves them so."""
    stop_keeping()
    assert originals() == ORIGINALS
    yield
    stop_keeping()
    assert originals() == ORIGINALS


def test_kept_sections_answer_as_the_scan_does():
    before = {section: config.get_options_for_section(section)
              for section in ("theme", "theme.light", "theme.dark", "server", "runner")}
    server_tuning.keep_config_sections()
    server_tuning.keep_config_sections()  # once per process: a second call changes nothing
    for section, options in before.items():
        assert config.get_options_for_section(section) == options
    mine = config.get_options_for_section("theme.light")
    mine["primaryColor"] = "#000000"  # a caller's changes stay in its copy
    assert config.get_options_for_section("theme.light") == before["theme.light"]


def test_the_theme_and_config_messages_are_as_streamlit_builds_them():
    server_tuning.keep_config_sections()
    for section in ("theme", "theme.light", "theme.dark", "theme.sidebar"):
        theirs, mine = CustomThemeConfig(), CustomThemeConfig()
        app_session._populate_theme_msg.__closure__[0].cell_contents(theirs, section)
        app_session._populate_theme_msg(mine, section)
        app_session._populate_theme_msg(mine, section)  # twice: merged, not doubled
        assert mine == theirs
    theirs, mine = Config(), Config()
    app_session._populate_config_msg.__closure__[0].cell_contents(theirs)
    app_session._populate_config_msg(mine)
    assert mine == theirs


def test_a_new_parse_of_the_config_is_seen():
    server_tuning.keep_config_sections()
    config.get_options_for_section("theme")
    assert "theme" in server_tuning._kept
    config._on_config_parsed.send()  # what Streamlit does after reading its config files
    assert server_tuning._kept == {} and server_tuning._built == {}


def test_the_patch_is_undone_and_a_new_parse_no_longer_reaches_it():
    assert server_tuning.keep_config_sections()
    assert originals() != ORIGINALS
    stop_keeping()
    assert originals() == ORIGINALS
    config.get_options_for_section("theme")
    assert server_tuning._kept == {}  # the real function answered: nothing kept


def test_a_streamlit_without_the_names_changes_nothing_and_says_so(monkeypatch):
    monkeypatch.setattr(streamlit_internals, "_degraded", {})
    monkeypatch.delattr(app_session, "_populate_theme_msg")  # as if renamed upstream
    assert server_tuning.keep_config_sections() is False
    assert config.get_options_for_section is ORIGINALS[0]  # all or nothing
    assert app_session._populate_config_msg is ORIGINALS[2]
    assert "config sections" in " ".join(streamlit_internals.degraded())
