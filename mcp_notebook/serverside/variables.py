"""Variables of a kernel without the hub, honestly: ``nb://vars``, ``nb://vars/{name}`` and
``nb://frames/{name}`` where the kernel's language gives a bounded, read-only way, else one sentence
saying why and what to enable.

R (IRkernel): ``nb://vars/{name}`` through ``inspect_request`` (IRkernel's own: the class and the
printed form of a named value, no cell run); the listing and frame pages through the opted-in
snippets (snippets.py). Anything sent waits for an idle kernel (shell.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..providers.base import ChangeSet, InvalidResourceParams, Provider, ResourceNotFound, ResourceReadError, int_param
from ..redact import DEFAULT_SECRET_WORDS, NameFilter, mask_secrets
from ..types import Annotations, Contents, Resource, ResourceTemplate
from ..uri import compile_template
from .shell import KernelBusy, NoAnswer, ShellAsker, snippet_request
from .snippets import R_NAME, r_frame_page, r_listing

_INDEX = compile_template("nb://vars{?offset,limit}")
_VAR = compile_template("nb://vars/{name}")
_FRAME = compile_template("nb://frames/{name}{?offset,limit}")
PRINTED_CHARS = 4000  # of IRkernel's printed form kept in a read
INSPECT_SECONDS = 10.0
OPT_IN = "c.MCPNotebookProxy.variable_snippets = True"
SECRET_NAMES = NameFilter(DEFAULT_SECRET_WORDS, (), ())  # the hub's default: a secret-looking name is hidden
HIDDEN = "hidden: the name looks like a secret (as a hub hides it)"


def _masked(name: str, text: str) -> str:
    """A value's printed form as a client may see it: hidden for a secret-looking name, else masked."""
    return HIDDEN if SECRET_NAMES.looks_secret(name) else mask_secrets(text)


def why_not(language: str, implementation: str | None = None) -> str | None:
    """The one sentence a variable read answers in a kernel whose language has no way here (None: R)."""
    lang = language.lower()
    if lang == "r":
        return None
    if lang == "python" and implementation == "ipykernel":
        return None  # the debugger's inspectVariables (debugpy's bounded reprs)
    if lang == "python" and implementation == "xeus-python":
        return (
            "variables of a xeus-python kernel are not read from the server: its debugger's inspectVariables "
            "serializes every global in full and richInspectVariables writes into the user's globals; cells, "
            "outputs and the notebook are served"
        )
    if lang == "python":
        return (
            "this Python kernel has no mcp-notebook hub and no debugger to ask: run %load_ext mcp_notebook in "
            "it for its variables and frames (cells, outputs and the notebook are served already)"
        )
    return (
        f"variables of a {language or 'unknown'}-language kernel are not served: no read-only snippet is "
        "written for this language yet (R has one); cells, outputs and the notebook are served"
    )


class ServedVariables(Provider):
    """``nb://vars…`` and ``nb://frames/{name}`` of one kernel served from the server's side."""

    def __init__(
        self,
        language: str,
        asker: ShellAsker | None,
        opted_in: Callable[[], bool],
        seconds: Callable[[], float],
        reason: str | None,
    ):
        self.language = language
        self.asker = asker
        self.opted_in = opted_in
        self.seconds = seconds
        self.reason = reason

    def owns(self, uri: str) -> bool:
        return uri == "nb://vars" or uri.startswith(("nb://vars/", "nb://vars?", "nb://frames/"))

    def may_run_user_code(self, uri: str) -> bool:
        return True  # a request to the kernel: on a worker

    def list_resources(self) -> list[Resource]:
        return [
            Resource(
                uri="nb://vars",
                name="vars",
                title="Variables",
                description=f"The {self.language} kernel's variables: name, class, type, dim, length, size "
                f"(R: needs {OPT_IN} on the Jupyter server).",
                mime_type="application/json",
                annotations=Annotations(audience=("assistant",), priority=0.9),
            )
        ]

    def list_templates(self) -> list[ResourceTemplate]:
        return [
            ResourceTemplate(
                uri_template="nb://vars/{name}",
                name="var",
                title="One variable",
                description="Its class and printed form (R: IRkernel's inspect_request; bounded).",
                mime_type="application/json",
            ),
            ResourceTemplate(
                uri_template="nb://frames/{name}{?offset,limit}",
                name="frame",
                title="Rows of a data frame",
                description=f"A page of an R data.frame or tibble as CSV (needs {OPT_IN}).",
                mime_type="text/csv",
            ),
        ]

    def snapshot(self, watched: frozenset[str]) -> ChangeSet:
        """Any cell may change any variable, and nothing is read to tell: every watched one is told."""
        return ChangeSet(updated={u for u in watched if self.owns(u)})

    def read(self, uri: str) -> list[Contents]:
        if self.reason is not None or self.asker is None:
            raise ResourceReadError(f"{uri[:200]}: {self.reason or 'this kernel cannot be asked'}")
        if self.language.lower() == "python":
            return [self._python(uri)]
        params = _INDEX.match(uri)
        if params is not None:
            return [self._listing(uri, params)]
        params = _VAR.match(uri)
        if params is not None:
            return [self._variable(uri, params["name"])]
        params = _FRAME.match(uri)
        if params is not None:
            return [self._frame(uri, params)]
        raise ResourceNotFound(uri)

    # -- the three reads --------------------------------------------------------------------
    def _snippet(self, uri: str, code: str) -> dict[str, Any]:
        if not self.opted_in():
            raise ResourceReadError(
                f"{uri[:200]}: listing R variables and paging frames runs a read-only snippet in the kernel, "
                f"off unless the server opts in ({OPT_IN}); nb://vars/{{name}} works without it"
            )
        seconds = self.seconds()
        _, data = self._ask("execute_request", snippet_request(code), seconds + 3.0, uri, published=True)
        try:
            doc = json.loads(data) if isinstance(data, str) else data
        except ValueError:
            doc = None
        if not isinstance(doc, dict):
            raise ResourceReadError(f"{uri[:200]}: the snippet's result was not JSON")
        if not doc.get("ok"):
            error = str(doc.get("error") or "failed")
            if "time limit" in error:
                error = f"the read took longer than {seconds:g} s inside R (MCPNotebookProxy.snippet_seconds) and was stopped"
            raise ResourceReadError(f"{uri[:200]}: {error[:500]}")
        return doc

    def _ask(
        self, msg_type: str, content: dict, timeout: float, uri: str, published: bool = False, channel: str = "shell"
    ) -> tuple[dict, Any]:
        assert self.asker is not None
        try:
            return self.asker.ask(msg_type, content, timeout, published, channel)
        except KernelBusy as exc:
            raise ResourceReadError(
                f"{uri[:200]}: {exc}; variables of this kernel are read only while it is idle (cells and outputs answer now)"
            ) from None
        except NoAnswer as exc:
            raise ResourceReadError(f"{uri[:200]}: {exc}") from None
        except (OSError, KeyError, ValueError) as exc:
            raise ResourceReadError(f"{uri[:200]}: the kernel's shell could not be reached ({exc})") from None

    def _python(self, uri: str) -> Contents:
        """ipykernel without the hub: its debugger's ``inspectVariables`` on control (debugpy's
        bounded reprs; no cell, no history, no output), only while idle."""
        params, var = _INDEX.match(uri), _VAR.match(uri)
        if params is None and var is None:
            raise ResourceReadError(
                f"{uri[:200]}: pages of frames need the mcp-notebook hub in this kernel (run %load_ext mcp_notebook)"
            )
        request = {"type": "request", "seq": 1, "command": "inspectVariables", "arguments": {}}
        reply, _ = self._ask("debug_request", request, INSPECT_SECONDS, uri, channel="control")
        found = (reply.get("body") or {}).get("variables") if reply.get("success") else None
        if not isinstance(found, list):
            raise ResourceReadError(f"{uri[:200]}: the kernel's debugger did not list its variables")
        rows = [
            {
                "name": v.get("name"),
                "type": v.get("type"),
                "value": _masked(str(v.get("name")), str(v.get("value") or "")[:PRINTED_CHARS]),
            }
            | {"uri": f"nb://vars/{v.get('name')}"}
            for v in found
            if isinstance(v, dict) and v.get("type") and str(v.get("name", "")).isidentifier()
        ]
        source = "the kernel's debugger (inspectVariables)"
        if var is not None:
            row = next((r for r in rows if r["name"] == var["name"]), None)
            if row is None:
                raise ResourceNotFound(uri, f"no variable {var['name'][:100]!r} in the kernel's namespace")
            return Contents(uri=uri, mime_type="application/json", text=json.dumps({**row, "source": source}))
        offset, limit = int_param(params or {}, "offset", 0), int_param(params or {}, "limit", 500)
        page = {
            "variables": rows[offset : offset + max(1, limit)],
            "total": len(rows),
            "offset": offset,
            "source": source,
        }
        return Contents(uri=uri, mime_type="application/json", text=json.dumps(page))

    def _listing(self, uri: str, params: dict[str, str]) -> Contents:
        offset, limit = int_param(params, "offset", 0), int_param(params, "limit", 500)
        doc = self._snippet(uri, r_listing(self.seconds()))
        rows = [_row(r) for r in doc.get("rows") or [] if isinstance(r, dict)]
        page = rows[offset : offset + max(1, limit)]
        out = {"variables": page, "total": doc.get("total"), "offset": offset, "source": "R snippet (opted in)"}
        return Contents(uri=uri, mime_type="application/json", text=json.dumps(out))

    def _variable(self, uri: str, name: str) -> Contents:
        if not R_NAME.match(name):
            raise InvalidResourceParams(f"{name[:100]!r} is not a syntactic R name (letters, digits, '.', '_')")
        if SECRET_NAMES.looks_secret(name):
            doc = {"name": name, "hidden": True, "reason": HIDDEN, "source": "not asked"}
            return Contents(uri=uri, mime_type="application/json", text=json.dumps(doc))
        reply, _ = self._ask(
            "inspect_request", {"code": name, "cursor_pos": len(name), "detail_level": 0}, INSPECT_SECONDS, uri
        )
        sections = _sections(str((reply.get("data") or {}).get("text/plain") or ""))
        if not reply.get("found") or "Class attribute" not in sections:  # (IRkernel finds a help page alone)
            raise ResourceNotFound(uri, f"no R variable {name!r} in the kernel's global environment")
        printed = sections.get("Printed form", "")
        doc = {
            "name": name,
            "class": [
                c.strip().strip('"')
                for c in sections.get("Class attribute", "").replace("[1]", " ").split()
                if c.strip()
            ],
            "printed": mask_secrets(printed[:PRINTED_CHARS]),
            "truncated": len(printed) > PRINTED_CHARS,
            "source": "IRkernel inspect_request",
        }
        return Contents(uri=uri, mime_type="application/json", text=json.dumps(doc))

    def _frame(self, uri: str, params: dict[str, str]) -> Contents:
        name = params["name"]
        if not R_NAME.match(name):
            raise InvalidResourceParams(f"{name[:100]!r} is not a syntactic R name (letters, digits, '.', '_')")
        if SECRET_NAMES.looks_secret(name):
            raise ResourceReadError(f"{uri[:200]}: {HIDDEN}")
        offset, limit = int_param(params, "offset", 0), int_param(params, "limit", 100)
        if not 0 < limit <= 10_000:
            raise InvalidResourceParams("limit must be between 1 and 10000")
        doc = self._snippet(uri, r_frame_page(name, offset, limit, self.seconds()))
        total = int(doc.get("rows") or 0)
        end = min(total, offset + limit)
        meta: dict[str, Any] = {"rows": total, "offset": offset, "columns": _list(doc.get("columns"))}
        meta["classes"] = _list(doc.get("classes"))
        if end < total:
            meta["next"] = f"nb://frames/{name}?offset={end}&limit={limit}"
        return Contents(uri=uri, mime_type="text/csv", text=str(doc.get("csv") or ""), meta=meta)


def _list(value: Any) -> list[Any]:
    """jsonlite unboxes a vector of one: back to a list."""
    return value if isinstance(value, list) else [] if value is None else [value]


def _row(row: dict[str, Any]) -> dict[str, Any]:
    if SECRET_NAMES.looks_secret(str(row.get("name"))):
        return {"name": row.get("name"), "hidden": True, "reason": HIDDEN}
    return {
        "name": row.get("name"),
        "class": _list(row.get("class")),
        "type": row.get("type"),
        "dim": _list(row.get("dim")) or None,
        "length": row.get("length"),
        "size": row.get("size"),
        "uri": f"nb://vars/{row.get('name')}",
    } | ({"frame": f"nb://frames/{row.get('name')}"} if "data.frame" in _list(row.get("class")) else {})


def _sections(text: str) -> dict[str, str]:
    """IRkernel's inspect text: ``# Title:\\n`` sections."""
    out: dict[str, str] = {}
    title = None
    lines: list[str] = []
    for line in text.splitlines():
        if line.startswith("# ") and line.endswith(":"):
            if title is not None:
                out[title] = "\n".join(lines).strip("\n")
            title, lines = line[2:-1], []
        else:
            lines.append(line)
    if title is not None:
        out[title] = "\n".join(lines).strip("\n")
    return out
