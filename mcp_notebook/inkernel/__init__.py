"""The hub inside this kernel: KernelHub (kernel_hub.py), its settings (config.py), start and stop
(lifecycle.py), what panels show of it (activity.py), the JupyterLab comm (lab_comm.py), %mcp (magics.py)."""
