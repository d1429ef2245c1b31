"""``python -m mcp_notebook.hubservice``: what JupyterHub runs."""

from .app import main

if __name__ == "__main__":
    main()
