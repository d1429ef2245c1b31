"""The ``mcp-notebook`` commands: cli.py and what its subcommands run (doctor, demo, client configs,
the IPython autoload, a quiet kernel launch)."""
