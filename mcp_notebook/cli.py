"""The ``mcp-notebook`` command."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def _demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    return run_demo(args.seconds)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mcp-notebook", description="A live Jupyter kernel as an MCP server.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="start a kernel with sample data and serve it until Ctrl-C")
    demo.add_argument("--seconds", type=float, default=None, help="stop after this many seconds")
    demo.set_defaults(func=_demo)
    return parser


def _version() -> str:
    from . import __version__

    return __version__


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
