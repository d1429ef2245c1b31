"""The package's version: the one source (pyproject.toml reads it through [tool.hatch.version];
labextension/package.json carries the same string, checked by tests/test_packaging.py)."""

__version__ = "0.1.0"
