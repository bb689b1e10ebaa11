"""The frame of every page: page config and title, the shared sidebar, the invitation to type a
prompt, and the guard that turns an unexpected error into a short message.

A page is one call at the top, then its drawing:

    from tinygpt_app.kit.frame import page

    with page("Attention") as state:       # stops here (with an invitation) if the prompt is empty
        logits, trace = caches.get_trace(state)
        ...
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import streamlit as st

from tinygpt.readouts.parts import family
from tinygpt_app import settings, streamlit_internals
from tinygpt_app.compute import figure_cache, shared_cache
from tinygpt_app.compute.model_cards import headline, read_card
from tinygpt_app.compute.models import (
    available_models,
    default_model_id,
    load_model,
    model_label,
    models_dir,
    session_models,
)
from tinygpt_app.kit import browser_token, hooks, navigation, notices, projector, widgets
from tinygpt_app.kit import state as s
from tinygpt_app.kit.labels import prompt_labels
from tinygpt_app.kit.plain_text import cut, plain, without_paths
from tinygpt_app.serving import browsers, fair_share, registry_report, session_door, turn_stats
from tinygpt_app.serving.client_address import address_group, client_address

KEY_BUCKET = "fair_share.bucket"
ADMISSION = fair_share.Admission(settings.page_runs())  # page runs at once in this process
HEAVY_TABS = fair_share.HeavyTabs()  # all heavy tabs of this process, as one tab
BROWSERS = browsers.Browsers(idle_seconds=settings.disconnected_session_ttl())  # their buckets
SESSIONS = browsers.Sessions(settings.sessions_per_address(),
                             idle_seconds=settings.disconnected_session_ttl())
if report_file := settings.registry_report():  # a bench reads the registries' sizes (off)
    turn_stats.STATS.on = True  # and where the runs spend their time, per address group
    registry_report.start(report_file, {
        "turns": turn_stats.STATS.snapshot,
        "buckets": BROWSERS.live, "busy_sessions": SESSIONS.live,
        "streamlit_sessions": streamlit_internals.session_counts,
        "refused_new_sessions": session_door.refused,
        "shared_cache_mb": lambda: round(shared_cache.total_bytes() / 2**20, 1)})
TOO_MANY_TABS = ("Too many tabs are open from your network address on this server. Close some "
                 "and reload this one.")
# The tab's icon, served by the app itself (Streamlit's media files, same origin): an emoji or a
# material icon would be drawn from a font fetched from a CDN, which fails offline.
FAVICON = Path(__file__).with_name("favicon.png")
INVITATION = ("Type a prompt in the sidebar (for example *To be, or not to be*) and the model "
              "will show you, step by step, how it guesses the next token.")


@contextmanager
def page(title: str, *, intro: str | None = None, needs_prompt: bool = True,
         icon: str | None = None) -> Iterator[s.AppState]:
    """Set up a page and yield the shared state; the page's body runs under the guard.

    Writes the title (and `intro`, a line under it), draws the sidebar, and, when the prompt is
    empty and the page `needs_prompt`, shows the invitation and stops the script: the body
    below the `with` always has at least one token. A page that works without a prompt (the
    training page) passes needs_prompt=False.
    """
    through_entry_point()
    navigation.begin_page_run()  # run on its own, or through app.py's navigation?
    figure_cache.install(settings.figure_cache_bytes())  # once per process
    shared_cache.start_janitor(settings.cache_idle_seconds())  # once: idle entries leave
    # A following student of a live class takes the teacher's view here; when the teacher is on
    # another page this run ends (its turn with it) and the switched-to page takes its own.
    for feature in hooks.registered():
        feature.before_page()
    st.set_page_config(page_title=f"{title} · tinygpt", page_icon=icon or FAVICON, layout="wide",
                       initial_sidebar_state="collapsed" if projector.requested() else "auto")
    browser_token.render()  # early: its first report cuts a session's first run short
    st.title(title)
    s.begin_page_run(title)
    with fair_turn(), guard():
        if intro:
            st.markdown(intro)
        state = sidebar()
        notices.numbers_warning(state)  # said on every page when the model overflows
        for feature in hooks.registered():  # a live class: publish or follow, and its bar
            feature.after_sidebar(state)
        if needs_prompt and not state.ready:
            st.info(INVITATION)
            st.stop()
        hold_back_answer()
        yield state
        for feature in hooks.registered():  # a teacher's controls, drawn by the page, go out
            feature.after_page()


@contextmanager
def fair_turn() -> Iterator[None]:
    """Run the body in this tab's turn: wait if it used more than its share lately, hold a page
    slot (ADMISSION), and charge the CPU it used, helper threads included, to its bucket.
    Every run takes one from its first line (app.py: the navigation, sidebar and hooks cost too),
    a page run on its own takes one in page(), and a fragment that computes (a slider's own
    rerun) takes one too, so no control of the app can be clicked in a loop for free. Inside a
    turn, a no-op."""
    if fair_share.current_cost() is not None:
        yield
        return
    browser, address = _who()
    if not SESSIONS.admit(session_id(), address):  # before any work, and its memory
        st.warning(TOO_MANY_TABS)
        st.stop()
    if SESSIONS.stayed(session_id(), session_door.STAYED):  # a student who stays: its address
        session_door.established(address)                  # keeps a door of its own
    start, group = time.monotonic(), address_group(address)
    fair_share.line_seconds(reset=True)
    bucket = wait_for_turn(group)
    credit, heavy = ((bucket.level, counts_as_heavy(bucket)) if bucket is not None
                     else (0.0, False))
    newcomer, known = place_in_line(bucket, browser, address)
    shares = BROWSERS.shares(bucket, browser, address)
    with fair_share.counting_cost() as cost:
        try:
            with (ADMISSION.slot(credit, alone=heavy, newcomer=newcomer, group=group,
                                 known=known),
                  fair_share.RUNS.running(session_id(), shares=shares)):
                yield
        finally:  # also after st.stop() and st.rerun()
            cpu = 0.0
            if bucket is not None:  # and what its helpers add later, when they add it
                late = functools.partial(_charge_late, bucket, heavy, group)
                HEAVY_TABS.charge(bucket, cpu := cost.close(late), heavy)
            turn_stats.STATS.add(group, runs=1, newcomer_runs=newcomer, cpu_charged_s=cpu,
                                 waited_line_s=fair_share.line_seconds(),
                                 turn_s=time.monotonic() - start)


def place_in_line(bucket: fair_share.Bucket | None, browser: str | None,
                  address: str) -> tuple[bool, bool]:
    """(newcomer, known) of this run in the Admission line. A newcomer comes after the others,
    and newcomers together leave them a slot: a tab that has not earned its place yet (a new
    browser's first seconds, a tab that spent its burst), and a run without a browser token
    from a stranger's address (session_door: none of its sessions stayed), whose tokenless
    runs share a bucket that starts full and would otherwise go first by credit (a script's
    fresh session per request sends no token). Known: a newcomer of an address that was there
    first, which goes before the strangers' newcomers. A live class's teacher is neither."""
    if bucket is None or leads_a_class():
        return False, False
    known = session_door.known(address)
    newcomer = fair_share.newcomer(bucket) or (not browser and not known)
    return newcomer, newcomer and known


def _charge_late(bucket: fair_share.Bucket, heavy: bool, group: str, cpu: float) -> None:
    """What a run's helper threads add after it was charged (a generation going on)."""
    HEAVY_TABS.charge(bucket, cpu, heavy)
    turn_stats.STATS.add(group, cpu_charged_s=cpu)


def session_id() -> str:
    """This browser tab's session (empty outside a Streamlit run)."""
    return streamlit_internals.session_id()


def wait_for_turn(group: str = "") -> fair_share.Bucket | None:
    """This session's CPU bucket, after waiting (with a note) if it used more than its share
    lately; None when fair shares are off (TINYGPT_FAIR_SHARE=0)."""
    most = settings.fair_share()
    if most <= 0:
        return None
    # today's share: the process divided among the sessions using it (heavy tabs get one share
    # together); the refill since the last run is counted at it. A live class's teacher keeps
    # the most a tab may have, and is never counted among the heavy tabs: the whole class
    # follows that tab's views.
    share = fair_share.share_per_tab(most, fair_share.RUNS.sessions(session_id()))
    bucket = st.session_state[KEY_BUCKET] = BROWSERS.bucket(  # a browser's, not a session's
        st.session_state.get(KEY_BUCKET), *_who(), share, settings.burst_seconds())
    HEAVY_TABS.bucket.share = share
    bucket.share = most if leads_a_class() else share
    wait = HEAVY_TABS.wait_seconds(bucket, heavy=counts_as_heavy(bucket))
    if wait > 0 and fair_share.RUNS.busy(session_id()):
        note = st.empty()
        note.info(f"This tab asked for a lot of work in a short time, so it waits up to "
                  f"{wait:.1f} s to leave the rest of the class its share of the server.")
        waited = fair_share.wait_while_busy(wait, session_id())  # sleeping lets go of the GIL
        note.empty()
        if turn_stats.STATS.on:  # a bench's report only: nothing to classify otherwise
            turn_stats.STATS.add(group, **{_what_waits(bucket): waited},
                                 long_waits=waited >= turn_stats.LONG_WAIT)
    return bucket


def _what_waits(bucket: fair_share.Bucket) -> str:
    """Which of a waiting run's limits held it longest: its own bucket, its address's
    newcomer pool or the heavy tabs' bucket (a turn_stats field)."""
    own = bucket.debt_seconds(), "waited_own_s"
    pool = bucket.pool.wait_seconds() if bucket.pool is not None else 0.0, "waited_pool_s"
    heavy = (HEAVY_TABS.shared_wait_seconds() if counts_as_heavy(bucket) else 0.0,
             "waited_heavy_s")
    return max(own, pool, heavy)[1]


def _who() -> tuple[str | None, str]:
    """(browser token, client address) of this run: what its CPU bucket is keyed on."""
    return browser_token.browser_token(), client_address(st.context.ip_address)


def leads_a_class() -> bool:
    """Does this tab lead others (the teacher of a live class, through its page hooks)?"""
    return any(feature.leads_others() for feature in hooks.registered())


def counts_as_heavy(bucket: fair_share.Bucket) -> bool:
    """Is this tab one of the heavy tabs (fair_share.HeavyTabs)? Never a live class's
    teacher, whom the whole class follows."""
    return bucket.heavy and not leads_a_class()


def through_entry_point() -> None:
    """Make sure app.py (the entry point) runs before the pages, from a server's first visit.

    Because a pages/ folder exists, a fresh server starts in Streamlit's older multipage mode:
    until app.py has called st.navigation once, a deep link such as /Attention runs the page
    file alone, without app.py's process settings, its "Home" entry and its sections. The first
    page run that way switches the server to app.py's navigation (a Streamlit class attribute,
    set once per process) and, on a session's first run (no click to lose), reruns: the same
    page, now through app.py. Pages opened on their own (AppTest.from_file) have no pages/
    folder beside them and are not affected.
    """
    if streamlit_internals.leave_pages_directory_mode() and s.KEY_PROMPT not in st.session_state:
        st.rerun()


HELD_BACK = ("A class question is open: this page shows its answer, so it waits for the "
             "reveal. Guess first!")


def hold_back_answer() -> None:
    """While a class question is open (a page hook says so), a page that shows its answer draws
    only a note and stops: the guess comes before the model's answer (issue 49)."""
    if navigation.shows_answer(navigation.current_url_path(), hooks.open_questions()):
        st.info(HELD_BACK, icon=":material/visibility_off:")
        st.stop()


@contextmanager
def guard() -> Iterator[None]:
    """Run a page body; an unexpected exception becomes a short error box, not a traceback.

    Streamlit's own control flow (st.stop, st.rerun) derives from BaseException and passes.
    A fragment (which reruns alone) wraps its body in its own guard.
    """
    try:
        yield
    except Exception as err:  # noqa: BLE001 - a page must never show a raw traceback
        notices.page_error(err)  # its traceback goes to the log once per kind and minute


def sidebar() -> s.AppState:
    """Draw the shared sidebar (model, prompt, position) and return the current state.

    When no model can be listed or loaded it shows why and stops the script (st.stop), so the
    caller always gets a state. An empty prompt gives a state whose `ready` is False.
    """
    s.init_from_url()
    with st.sidebar:
        prompt, notes = _prompt_input()  # the app's main input, first on every screen
        models = available_models() + list(session_models())
        if not models:
            st.error(f"No model found in {plain(models_dir().name)}/. Train one or add a "
                     "checkpoint (see the README).")
            st.stop()
        model_id = _model_select(models)
        try:
            model, tokenizer = load_model(model_id)
        except Exception as err:  # noqa: BLE001 - e.g. the default file is damaged
            st.error(f"Could not load {plain(cut(model_id))}: "
                     f"{plain(cut(without_paths(err), notices.ERROR_CHARS))}")
            st.stop()
        n_ctx = min(model.config.n_ctx, s.MAX_APP_TOKENS)
        ids, more_notes = s.encode_prompt(tokenizer, prompt, n_ctx)
        notes += more_notes
        labels = prompt_labels(tokenizer, ids)  # "5:\xf0 (🍕 1/4)": a character's bytes
        position = _position_select(labels) if len(ids) else 0
        cfg = model.config
        st.caption(f"{family(cfg)} · {cfg.n_layer} blocks · {cfg.n_head} heads · "
                   f"d = {cfg.n_embd} · v = {cfg.vocab_size:,} · context {cfg.n_ctx}")
        menu_or_note()
        projector.toggle()
    s.sync_url(model_id, prompt, position)
    for note in notes:
        st.warning(plain(note))
    return s.AppState(model_id, model, tokenizer, prompt, ids, position, labels, notes)


def menu_or_note() -> None:
    """The page menu, or for a following student the note that the teacher picks the page."""
    notes = [n for n in (f.sidebar_note() for f in hooks.registered()) if n]
    if notes:  # a following student: the teacher picks the page, 20 elements fewer
        st.caption(plain(notes[0]))
    else:
        page_menu()
        navigation.close_sidebar_on_choice(f".st-key-{MENU_KEY}")  # one tap on a phone


MENU_KEY = "page_menu"  # the menu's container: class st-key-page_menu (browser tests find it)
def page_menu() -> None:
    """The app's pages, section by section, as links at the top of the sidebar.

    Streamlit's own sectioned menu (hidden by app.py) puts <div>s inside its <ul>, which a
    screen reader reads as a broken list. A page run alone (AppTest.from_file, without app.py's
    navigation) has no pages to link to, and no menu.
    """
    pages = navigation.menu_pages()
    if pages is None:
        return
    home, sections = pages
    with st.container(key=MENU_KEY):
        st.page_link(home, label=navigation.HOME_TITLE, icon=navigation.HOME_ICON)
        for section, section_pages in sections.items():
            st.caption(section)
            for section_page in section_pages:
                st.page_link(section_page)


def _on_model_change() -> None:
    """Try the newly chosen model; if it cannot be loaded keep the previous one."""
    chosen = st.session_state[s.W_MODEL]
    try:
        load_model(chosen)
    except Exception as err:  # noqa: BLE001 - any loading failure is shown, not raised
        st.session_state[s.MODEL_ERROR] = (f"Could not load {cut(chosen)}: "
                                           f"{cut(without_paths(err), notices.ERROR_CHARS)}")
        st.session_state[s.W_MODEL] = st.session_state[s.KEY_MODEL]
        return
    st.session_state[s.KEY_MODEL] = chosen
    st.session_state.pop(s.MODEL_ERROR, None)
    s.follow_model(chosen)


def _model_select(models: list[str]) -> str:
    if st.session_state.get(s.KEY_MODEL) not in models:
        st.session_state[s.KEY_MODEL] = default_model_id()
    # re-filled from the shared value on every run (as the prompt): after a change of page the
    # widget would otherwise fall back to the first option while the page uses KEY_MODEL
    st.session_state[s.W_MODEL] = st.session_state[s.KEY_MODEL]
    st.selectbox("Model", models, key=s.W_MODEL, on_change=_on_model_change,
                 format_func=model_label,
                 help="Models found in the server's models folder, and the ones you trained "
                      "on the Training page (only you see those).")
    error = st.session_state.pop(s.MODEL_ERROR, None)  # said once: the next click clears it
    if error:
        st.error(plain(f"{error}. The model in use is still "
                       f"{model_label(st.session_state[s.KEY_MODEL])}."))
    _about_model(st.session_state[s.KEY_MODEL])
    return st.session_state[s.KEY_MODEL]


CARD_LINE_CHARS = 150  # the picker's line on the model; the expander below has all of it


def _about_model(model_id: str) -> None:
    """Under the picker, what the chosen model is (its card file): its size and data in one
    line, what it can and cannot know one click away; no card, one line saying so."""
    card = read_card(model_id)
    if card is None:
        widgets.model_card(None)
        return
    st.caption(plain(cut(headline(card), CARD_LINE_CHARS)))
    with st.expander("What this model can and cannot know"):
        widgets.model_card(card)


def _on_prompt_change() -> None:
    text = st.session_state[s.W_PROMPT]
    st.session_state[s.PROMPT_CUT] = len(text) > s.MAX_PROMPT_CHARS
    st.session_state[s.KEY_PROMPT] = text[:s.MAX_PROMPT_CHARS]


APPLY_KEY = "sidebar.apply_prompt"


def _prompt_input() -> tuple[str, list[str]]:
    # the widget is re-filled from the shared value on every run: widget state alone does not
    # survive a change of page, the plain session_state value does
    st.session_state[s.W_PROMPT] = st.session_state[s.KEY_PROMPT]
    st.text_area("Prompt", key=s.W_PROMPT, height=120, on_change=_on_prompt_change,
                 help="Type anything, then press Apply (or Ctrl+Enter) to run the model.")
    # a phone has no Ctrl+Enter: the click sends the typed text with it (on_change above)
    st.button("Apply", key=APPLY_KEY)
    link_note = s.link_note(st.session_state[s.KEY_PROMPT])
    if link_note:  # said under the box: the link would silently lose the prompt
        st.caption(plain(link_note))
    notes = []
    if st.session_state.get(s.PROMPT_CUT):
        notes.append(f"The prompt was cut to its first {s.MAX_PROMPT_CHARS:,} characters.")
    return st.session_state[s.KEY_PROMPT], notes


def _on_position_change() -> None:
    st.session_state[s.KEY_POS] = int(st.session_state[s.W_POS])


def _position_select(labels: list[str]) -> int:
    n = len(labels)
    position = st.session_state.get(s.KEY_POS, -1)
    previous_n = st.session_state.get(s.POS_N)
    followed_end = previous_n not in (None, n) and position == previous_n - 1
    if not 0 <= position < n or followed_end:
        position = n - 1  # new prompt: stay on the last token if we were on it
    st.session_state[s.KEY_POS] = position
    st.session_state[s.POS_N] = n
    st.session_state[s.W_POS] = position
    if n == 1:
        st.caption(f"Position inspected: 0 ({plain(labels[0])})")
    else:
        st.select_slider("Position inspected", options=list(range(n)), key=s.W_POS,
                         format_func=lambda i: labels[i], on_change=_on_position_change,
                         help="The token whose numbers the pages zoom in on.")
    return position
