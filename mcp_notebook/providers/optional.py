"""Optional libraries: which are importable (without importing them), and the clear error a read
answers when one it needs is missing, naming the package and the line that installs it."""

from __future__ import annotations

import importlib.util
import re
import sys

from .base import ResourceReadError

# import name -> what pip installs
PIP_NAMES = {
    "narwhals": "narwhals",
    "pyarrow": "pyarrow",
    "pandas": "pandas",
    "numpy": "numpy",
    "polars": "polars",
    "matplotlib": "matplotlib",
    "PIL": "pillow",
    "duckdb": "duckdb",
    "dask": "dask[dataframe]",
    "pyspark": "pyspark",
    "ibis": "ibis-framework",
    "ipywidgets": "ipywidgets",
    "sqlalchemy": "sqlalchemy",
    "nbformat": "nbformat",
}
_EAGER = ("pyarrow", "polars", "pandas")  # what a lazy frame's rows may be collected into
# A pattern string: compiled (and cached by re) at the first failed import it reads, not at load.
_MODULE_IN_MESSAGE = r"(?:No module named|Required module|module) '([A-Za-z0-9_.]+)'"


class MissingPackage(ResourceReadError):
    """A read needs a library that is not installed in the kernel's environment."""

    def __init__(self, package: str, what: str):
        self.package = package
        super().__init__(
            f"{what} needs {package}, which is not installed in the kernel's environment. "
            f"Install it there: {sys.executable} -m pip install '{package}'"
        )


def installed(module: str) -> bool:
    """Whether ``module`` can be imported (nothing is imported)."""
    if module in sys.modules:
        return sys.modules[module] is not None
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def eager_backend() -> str | None:
    """The first of pyarrow, polars, pandas that is installed (rows of a lazy frame land there)."""
    return next((lib for lib in _EAGER if installed(lib)), None)


def missing_package(exc: BaseException, what: str) -> MissingPackage | None:
    """The clear error for ``exc`` when it says an optional library is missing, else None. Also
    recognises engines that wrap the ImportError in their own exception (DuckDB does). Runs no code
    of ``exc``'s class (its ``__str__`` may be a user's): only its ``name`` and its first argument."""
    name = exc.name if isinstance(exc, ImportError) else None
    if not name:
        args = exc.args
        text = args[0] if args and type(args[0]) is str else ""
        m = re.search(_MODULE_IN_MESSAGE, text)
        name = m.group(1) if m and ("import" in text.lower() or isinstance(exc, ImportError)) else None
    if not isinstance(name, str) or not name:
        return None
    top = name.partition(".")[0]
    package = PIP_NAMES.get(top)
    return None if package is None else MissingPackage(package, what)
