"""The frame of every page: page config and title, the shared sidebar, the invitation to type a
prompt, and the guard that turns an unexpected error into a short message.

A page is one call at the top, then its drawing:

    from tinygpt_app.kit.frame import page

    with page("Attention") as state:       # stops here (with an invitation) if the prompt is empty
        logits, trace = caches.get_trace(state)
        ...
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import streamlit as st

from tinygpt.readouts.parts import family
from tinygpt_app import settings
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
from tinygpt_app.host import host, load_wing
from tinygpt_app.kit import (
    browser_token,
    hooks,
    link_notes,
    navigation,
    notices,
    projector,
    widgets,
)
from tinygpt_app.kit import state as s
from tinygpt_app.kit.labels import prompt_labels
from tinygpt_app.kit.plain_text import cut, plain, without_paths

# The tab's icon, served by the app itself (Streamlit's media files, same origin): an emoji or a
# material icon would be drawn from a font fetched from a CDN, which fails offline.
FAVICON = Path(__file__).with_name("favicon.png")
INVITATION = ("Type a prompt in the sidebar (for example *To be, or not to be*) and the model "
              "will show you, step by step, how it guesses the next token.")


@contextmanager
def page(title: str, *, intro: str | None = None, needs_prompt: bool = True,
         icon: str | None = None, sizes: bool = False) -> Iterator[s.AppState]:
    """Set up a page and yield the shared state; the page's body runs under the guard.

    Writes the title (and `intro`, a line under it), draws the sidebar, and, when the prompt is
    empty and the page `needs_prompt`, shows the invitation and stops the script: the body
    below the `with` always has at least one token. A page that works without a prompt (the
    training page) passes needs_prompt=False. With `sizes`, a caption above the body gives the
    live sizes (n tokens, d, v, blocks, heads) the page's formulas use.
    """
    load_wing()  # a page run on its own too (app.py has done it otherwise)
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
        link_notes.repeat(st.session_state.get(s.KEY_VISIT))  # a cut first run's notes, again
        state = sidebar()
        notices.numbers_warning(state)  # said on every page when the model overflows
        for feature in hooks.registered():  # a live class: publish or follow, and its bar
            feature.after_sidebar(state)
        if needs_prompt and not state.ready:
            st.info(INVITATION)
            st.stop()
        hold_back_answer()
        if sizes:
            st.caption(state.sizes())
        yield state
        for feature in hooks.registered():  # a teacher's controls, drawn by the page, go out
            feature.after_page()


def fair_turn() -> AbstractContextManager[None]:
    """This run's turn of the server (tinygpt_app.host): a class server's fair share of the
    processor (tinygpt_hosting.serving.turn); for one user, nothing to wait for. Every run
    takes one from its first line (app.py), a page run on its own takes one in page(), and a
    fragment that computes takes one too; inside a turn, a no-op."""
    return host().turn()


def session_id() -> str:
    """This browser tab's session ("" outside a Streamlit run, and for one user: without the
    hosting wing nothing is keyed on it)."""
    return host().streamlit.session_id()


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
    if host().streamlit.leave_pages_directory_mode() and s.KEY_PROMPT not in st.session_state:
        st.rerun()


HELD_BACK = ("A class question is open: this page shows its answer, so it waits for the "
             "reveal.")  # said the same before and after this student's own guess


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
    asked = st.session_state.get(s.KEY_MODEL)
    if asked not in models:
        st.session_state[s.KEY_MODEL] = default_model_id()
        if asked:  # a link's, or one of this session's models that has since gone
            link_notes.say(f"There is no model {asked} here, so the model is "
                           f"{st.session_state[s.KEY_MODEL]}.", st.session_state.get(s.KEY_VISIT))
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


CARD_LINE_CHARS = 110  # the picker's line on the model; the expander below has all of it


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
