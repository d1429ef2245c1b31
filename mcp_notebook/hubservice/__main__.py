"""Deprecated: ``python -m mcp_notebook.hubservice`` runs ``python -m mcp_notebook.jupyterhub_service``."""

from ..jupyterhub_service.app import main

if __name__ == "__main__":
    main(renamed_from="mcp_notebook.hubservice")
