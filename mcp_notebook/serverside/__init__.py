"""Kernels served from the Jupyter server's side (issue #43): any kernel without the in-kernel hub
(R, xeus-python, Julia, a Python kernel that never ran ``%load_ext``) gets the same ``nb://`` URIs
from what the server sees of it: its IOPub messages (cells and outputs, iopub_capture.py), its
notebook on disk, and for R an ``inspect_request`` or, when the user opts in, a read-only snippet
(variables.py, snippets.py). kernel.py composes one kernel's server; watch.py follows the server's
kernels. Imported only by the server extension (jupyter_server and pyzmq are there)."""
