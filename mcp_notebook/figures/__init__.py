"""Descriptions of figures and rich outputs a model can read (issue #44).

``summary`` (numbers of one series), ``bundle`` (any MIME bundle alone: Plotly and Vega-Lite JSON,
HTML tables, LaTeX, Markdown, images, widgets, unknown types) and ``mpl`` (a live matplotlib
figure) import nothing of the kernel or IPython: a Jupyter server can reuse ``bundle`` for kernels
without the hub. ``live`` is the in-kernel side: it sees a figure when it is shown.
"""
