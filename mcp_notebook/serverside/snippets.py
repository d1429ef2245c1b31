"""The read-only snippets run in an R kernel when the user opted in (``MCPNotebookProxy.variable_snippets``):
their exact text (docs/kernels.md shows it), built only from validated names and whole numbers.

Each runs as a *silent* ``execute_request`` with ``store_history: false`` (IRkernel then moves no
execution count, sends no output, calls no value handler, so ``.Last.value`` stays), inside
``local()`` (nothing is assigned in the global environment), bounded by ``setTimeLimit`` inside R
(an interrupt would abort the user's queued cells), and brings its result back with IRkernel's own
display function (``getOption("jupyter.base_display_func")``, which IRkernel honours whatever
``silent`` says): one ``display_data`` of :data:`SNIPPET_MIME` parented to our request, which only the
server reads (frontends draw outputs of their own requests only).
"""

from __future__ import annotations

import re

SNIPPET_MIME = "application/vnd.mcp-notebook.snippet+json"
R_NAME = re.compile(r"^(?:[A-Za-z]|\.(?![0-9]))[A-Za-z0-9._]{0,199}$")  # a syntactic R name, no backquotes
MAX_NAMES = 2000  # names the listing describes (the rest are counted)

_WRAP = """local({{
  .mcp <- tryCatch({{
    setTimeLimit(elapsed = {seconds}, transient = TRUE)
    env <- globalenv()
{body}
    setTimeLimit()
    r
  }}, error = function(e) {{ setTimeLimit(); list(ok = FALSE, error = conditionMessage(e)) }})
  getOption("jupyter.base_display_func")(list("{mime}" = as.character(
    jsonlite::toJSON(.mcp, auto_unbox = TRUE, null = "null", na = "null", digits = NA, force = TRUE))))
  invisible()
}})"""

_LISTING = """    nms <- ls(env)
    rows <- lapply(head(nms, {max_names}), function(n) {{
      if (bindingIsActive(n, env)) return(list(name = n, class = "active binding"))
      v <- get(n, envir = env, inherits = FALSE)
      d <- dim(v)
      list(name = n, class = class(v), type = typeof(v), dim = if (is.null(d)) NULL else as.numeric(d),
           length = length(v), size = as.numeric(utils::object.size(v)))
    }})
    r <- list(ok = TRUE, total = length(nms), rows = rows)"""

_PAGE = """    if (!exists("{name}", envir = env, inherits = FALSE)) stop("no variable {name}")
    if (bindingIsActive("{name}", env)) stop("{name} is an active binding")
    v <- get("{name}", envir = env, inherits = FALSE)
    if (!is.data.frame(v)) stop(paste0("{name} is a ", class(v)[1], ", not a data frame"))
    n <- nrow(v)
    page <- as.data.frame(v[seq_len(max(0, min(n - {offset}, {limit}))) + {offset}, , drop = FALSE])
    con <- textConnection("csv", "w", local = TRUE)
    utils::write.csv(page, con, row.names = FALSE)
    close(con)
    r <- list(ok = TRUE, rows = n, columns = names(v), offset = {offset},
              classes = vapply(v, function(c) class(c)[1], ""), csv = paste(csv, collapse = "\\n"))"""


def r_listing(seconds: float) -> str:
    """The R snippet that describes the global environment's names (class, type, dim, length, size)."""
    return _WRAP.format(seconds=_seconds(seconds), mime=SNIPPET_MIME, body=_LISTING.format(max_names=MAX_NAMES))


def r_frame_page(name: str, offset: int, limit: int, seconds: float) -> str:
    """The R snippet that reads rows ``offset`` to ``offset + limit`` of data frame ``name`` as CSV."""
    if not R_NAME.match(name):
        raise ValueError(f"not a syntactic R name: {name[:100]!r}")
    if not (isinstance(offset, int) and isinstance(limit, int) and offset >= 0 and 0 < limit <= 100_000):
        raise ValueError("offset must be >= 0 and limit between 1 and 100000")
    body = _PAGE.format(name=name, offset=offset, limit=limit)
    return _WRAP.format(seconds=_seconds(seconds), mime=SNIPPET_MIME, body=body)


def _seconds(seconds: float) -> str:
    return f"{max(0.01, min(float(seconds), 600.0)):.3g}"
