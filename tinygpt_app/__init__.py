"""The Streamlit app's shared code, one module per concern.

- `frame`: the page frame (config, title, sidebar, invitation, error guard): one call per page.
- `state`: what a session remembers and the links that reproduce it; page controls.
- `models`, `caches`, `training`: the models a user may pick, what the server computes once
  and shares, the training job (`training_worker`: the child process that runs it).
- `widgets`, `labels`: explanations, chips, tables, `show_chart`; how tokens are written.
- `charts`: Plotly figure builders, one module per stage, without Streamlit.
- `settings`, `navigation`: the environment's settings; the page list.

Arrows point one way: `app.py` and `pages/` import this package, this package imports
`tinygpt`, and `tinygpt` imports neither. Importing it changes no process-wide setting (app.py
calls `settings.configure_process()`).
"""
