"""``python -m mcp_notebook.jupyterhub_service``: what JupyterHub runs."""

from .app import main

if __name__ == "__main__":
    main()
