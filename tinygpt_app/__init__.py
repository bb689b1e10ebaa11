"""The Streamlit app's shared code, one module per concern.

Arrows point one way: `app.py` and `pages/` import this package, this package imports
`tinygpt`, and `tinygpt` imports neither.
"""
