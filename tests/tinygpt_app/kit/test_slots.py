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
