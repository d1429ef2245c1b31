"""The server's side without a kernel (issue #43): the snippets the docs show are the ones sent, names
are checked before they reach R, and the IOPub capture turns a kernel's messages into cells."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from mcp_notebook.inkernel.config import MCPHub
from mcp_notebook.serverside.iopub_capture import IopubCapture
from mcp_notebook.serverside.snippets import r_frame_page, r_listing
from mcp_notebook.serverside.variables import why_not

DOC = Path(__file__).resolve().parents[1] / "docs" / "kernels.md"


def test_the_docs_show_the_exact_snippets():
    text = DOC.read_text()
    assert r_listing(2.0) in text
    assert r_frame_page("df", 0, 100, 2.0) in text


@pytest.mark.parametrize("name", ["a()", "`x`", "x; system('id')", "1abc", ".2x", 'a"b', "", "x" * 300])
def test_a_name_that_is_not_a_syntactic_r_name_never_reaches_r(name):
    with pytest.raises(ValueError, match="not a syntactic R name"):
        r_frame_page(name, 0, 10, 1.0)


def test_bad_pages_are_refused():
    for offset, limit in ((-1, 10), (0, 0), (0, 10**6)):
        with pytest.raises(ValueError):
            r_frame_page("df", offset, limit, 1.0)


def msg(kind: str, parent: str, **content: object) -> dict:
    return {"header": {"msg_type": kind}, "parent_header": {"msg_id": parent, "session": "s1"}, "content": content}


def test_iopub_messages_become_cells_and_ours_are_left_out():
    cap = IopubCapture(MCPHub())
    png = base64.b64encode(b"\x89PNG\r\n\x1a\nbytes").decode()
    cap.mark_ours("ours")
    feed = [
        msg("status", "r1", execution_state="busy"),
        msg("execute_input", "r1", code="plot(1:10)", execution_count=3),
        msg("stream", "r1", name="stdout", text="hello\n"),
        msg("display_data", "r1", data={"image/png": png, "text/plain": "plot"}, metadata={}),
        msg("stream", "other", name="stdout", text="not this cell\n"),
        msg("execute_input", "ours", code="local({})", execution_count=4),
        msg("status", "ours", execution_state="idle"),
    ]
    assert not any(cap.feed(m) for m in feed)
    assert cap.current is not None and cap.state == "busy"
    assert cap.feed(msg("status", "r1", execution_state="idle"))  # the cell's own idle closes it
    (cell,) = cap.snapshot()
    assert (cell.source, cell.execution_count, cell.status) == ("plot(1:10)", 3, "ok")
    assert [o.output_type for o in cell.outputs] == ["stream", "display_data"]
    assert cell.outputs[0].text() == "hello\n" and cell.outputs[1].data["image/png"] == png
    cap.feed(msg("execute_input", "r2", code='stop("boom")', execution_count=4))
    cap.feed(msg("error", "r2", ename="error", evalue="boom", traceback=["Error: boom"]))
    assert cap.restarted("died")  # the kernel went away mid-cell: closed as an error saying so
    last = cap.snapshot()[-1]
    assert last.status == "error" and "died" in last.outputs[-1].evalue and cap.restarts == 1


def test_unconfigured_languages_say_why_in_one_sentence():
    assert why_not("R") is None
    assert "%load_ext mcp_notebook" in (why_not("python") or "")  # a Python kernel with no debugger to ask
    assert why_not("python", "ipykernel") is None  # its debugger's inspectVariables
    assert "inspectVariables" in (why_not("python", "xeus-python") or "")
    assert "julia" in (why_not("julia") or "")
