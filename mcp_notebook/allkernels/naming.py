"""The URI scheme of a front that serves many kernels (docs/DESIGN.md, "One endpoint for every kernel").

- ``nb://kernels``: the kernels, as JSON (id, label, notebook, state, last execution, current).
- ``nb://kernels/{kernel}/{rest}``: a resource of one kernel. ``{kernel}`` is its label: the
  notebook's file name without ``.ipynb`` (for a kernel with no notebook, e.g. one started by
  plain jupyter_client, the name of its working directory) when no other running kernel has that
  name, else the kernel id (the id is always accepted too). ``{rest}`` is the kernel's own URI without
  ``nb://`` (``nb://vars/df`` → ``nb://kernels/analysis/vars/df``), or the whole URI for another
  scheme (a custom ``app://orders/north`` → ``nb://kernels/analysis/app://orders/north``).
- Every other URI (``nb://vars/df``, ``app://…``) is the current kernel's.

Labels are percent-encoded in URIs (a notebook name may hold spaces).
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable
from urllib.parse import quote, unquote

KERNELS_URI = "nb://kernels"
PREFIX = "nb://kernels/"
KERNEL_VAR = "{kernel}"


def notebook_stem(path: str | None) -> str | None:
    if not path:
        return None
    name = posixpath.basename(path.replace("\\", "/"))
    return name[: -len(".ipynb")] if name.endswith(".ipynb") else name or None


def labels(kernels: Iterable[tuple[str, str | None]], where: dict[str, str | None] | None = None) -> dict[str, str]:
    """Kernel id -> label, for ``(kernel id, notebook path)`` pairs of the running kernels; a kernel
    with no notebook is named after its working directory (``where``: kernel id -> path)."""
    pairs = list(kernels)
    where = where or {}
    stems = [notebook_stem(path) or _dir_name(where.get(kid)) for kid, path in pairs]
    taken = {stem: stems.count(stem) for stem in stems if stem}
    ids = {kid for kid, _ in pairs}
    out = {}
    for (kid, _), stem in zip(pairs, stems, strict=True):
        unique = stem is not None and taken[stem] == 1 and (stem not in ids or stem == kid)
        out[kid] = stem if unique else kid
    return out


def _dir_name(path: str | None) -> str | None:
    if not path:
        return None
    return posixpath.basename(path.replace("\\", "/").rstrip("/")) or None


def qualify(label: str, uri: str) -> str:
    """The kernel-qualified form of a kernel's own ``uri``."""
    rest = uri[len("nb://") :] if uri.startswith("nb://") else uri
    return f"{PREFIX}{quote(label, safe='')}/{rest}"


def qualify_template(template: str) -> str:
    """A kernel's URI template, qualified with a ``{kernel}`` variable."""
    rest = template[len("nb://") :] if template.startswith("nb://") else template
    return f"{PREFIX}{KERNEL_VAR}/{rest}"


def split(uri: str) -> tuple[str, str] | None:
    """``(label, the kernel's own URI)`` of a qualified URI (or template), else None."""
    if not uri.startswith(PREFIX):
        return None
    label, sep, rest = uri[len(PREFIX) :].partition("/")
    if not sep or not label or not rest:
        return None
    first = rest.split("/", 1)[0]
    scheme = first.endswith(":") and "?" not in first  # a query may hold "x:/" (nb://history?q=http://…)
    inner = rest if scheme else "nb://" + rest  # another scheme: the whole URI
    return unquote(label), inner
