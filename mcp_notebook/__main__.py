"""``python -m mcp_notebook``: the ``mcp-notebook`` command, without relying on PATH."""

import sys

from .commands.cli import main

sys.exit(main())
