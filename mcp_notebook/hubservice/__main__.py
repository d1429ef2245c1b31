"""``python -m mcp_notebook.hubservice``: what the Hub runs."""

from .app import main

if __name__ == "__main__":
    main()
