"""kit.slots: a session's typed values, each bounded in bytes, kept across reruns."""

from streamlit.testing.v1 import AppTest


def _script():
    import streamlit as st

    from tinygpt_app.kit.slots import Slot, forget_all, set_widget, widget_value

    runs = Slot("demo.runs", 0)
    note = Slot("demo.note", None, max_bytes=200)
    runs.set(runs.get() + 1)
    try:
        note.set("x" * 1000)  # heavier than its bound: refused, not kept
    except ValueError as err:
        st.text(f"refused: {err}")
    if runs.get() == 2:
        set_widget("demo.box", "typed")
    st.text_input("box", key="demo.box")
    st.text(f"runs={runs.get()} note={note.is_set()} box={widget_value('demo.box')!r}")
    if runs.get() == 3:
        forget_all("demo.")
        st.text(f"forgotten: runs={runs.get()}")


def test_a_slot_keeps_its_value_and_refuses_one_over_its_bound():
    at = AppTest.from_function(_script, default_timeout=30).run()
    texts = [t.value for t in at.text]
    assert "refused: demo.note holds at most 200 bytes, not 1,050" in texts
    assert "runs=1 note=False box=''" in texts
    at.run()
    assert "runs=2 note=False box='typed'" in [t.value for t in at.text]
    at.run()
    assert "forgotten: runs=0" in [t.value for t in at.text]



def _page_slot_bounds() -> dict[str, int]:
    """The slots the page scripts declare (`NAME = Slot("key", ..., max_bytes=...)`): pages are
    scripts, not modules, so their declarations are read, each bound evaluated after the
    page's own imports."""
    import ast
    from pathlib import Path

    from tinygpt_app.kit.slots import SLOT_BYTES

    bounds = {}
    for path in sorted((Path(__file__).parents[3] / "pages").glob("*.py")):
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source)
        imports = ast.Module([node for node in tree.body
                              if isinstance(node, ast.Import | ast.ImportFrom)], [])
        names: dict = {}
        exec(compile(imports, str(path), "exec"), names)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Slot":
                bound = next((eval(compile(ast.Expression(k.value), str(path), "eval"), names)
                              for k in node.keywords if k.arg == "max_bytes"), SLOT_BYTES)
                bounds[node.args[0].value] = bound
    return bounds


def test_every_declared_slot_fits_in_a_sessions_bound_with_the_prompt():
    """kit.state.SESSION_STATE_BYTES is what one session may keep beside its trained models:
    every slot of the app, its pages and the hosting wing at its bound, with the prompt twice
    (the view's, the sidebar box's) at its longest, fits under it. A slot bounded as a session
    model (the training job's, which holds the model it trains) counts with the models."""
    import importlib
    import pkgutil

    import tinygpt_app
    import tinygpt_hosting
    from tinygpt_app.compute.models import SESSION_MODEL_BYTES
    from tinygpt_app.compute.shared_cache import nbytes_of
    from tinygpt_app.kit import slots
    from tinygpt_app.kit.state import MAX_PROMPT_CHARS, SESSION_STATE_BYTES

    for package in (tinygpt_app, tinygpt_hosting):
        for module in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if not module.name.endswith("__main__"):
                importlib.import_module(module.name)
    bounds = {key: bound for key, bound in slots.declared_bounds().items()
              if not key.startswith("demo.")}  # this file's own demo slots
    pages = _page_slot_bounds()
    assert "training.job" in pages and len(bounds) >= 30  # the app's, the wing's, the pages'
    bounds.update(pages)
    kept = sum(b for b in bounds.values() if b != SESSION_MODEL_BYTES)
    prompt = nbytes_of("\U0001F600" * MAX_PROMPT_CHARS)
    assert kept + 2 * prompt <= SESSION_STATE_BYTES
