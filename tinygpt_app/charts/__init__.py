"""Plain Plotly figure builders, one module per stage of the model.

One convention everywhere: data in (NumPy arrays and label lists, already computed by
`tinygpt`), the title in, a `plotly.graph_objects.Figure` out. No model math, no Streamlit, no
process settings: the same figures work in a notebook (`fig.show()`, see docs/notebook.ipynb).
"""
