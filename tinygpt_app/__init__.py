"""The Streamlit app's shared code, one subpackage per concern.

- `kit`: the page frame (config, title, sidebar, invitation, error guard) and its hooks, state
  and links, navigation, widgets, labels, projector mode.
- `compute`: the models a user may pick and what the server computes once and shares.
- `sections`: parts of pages shared by several pages.
- `training`: the training job and the child process that runs it.
- `settings`: the environment's settings.
- `charts`: Plotly figure builders, one module per stage, without Streamlit.

The live class and the serving machinery live in the hosting wing, `tinygpt_hosting`.

Arrows point one way: `app.py` and `pages/` import this package, this package imports
`tinygpt`, and `tinygpt` imports neither (.importlinter, tests/test_import_contracts.py).
Importing it changes no process-wide setting (app.py calls `settings.configure_process()`).
"""
