"""The redactor on its own (pure, no kernel): what it masks, what it leaves alone."""

from __future__ import annotations

import base64
import json
import secrets

import pytest

from mcp_notebook.redact import MASK, REDACTOR, hidden_strings, mask_secrets
from mcp_notebook.types import Contents, Resource

HIDDEN = "hunter2-" + secrets.token_hex(6)
ODD = 'we"ird\\value-' + secrets.token_hex(3)
REDACTOR.add([HIDDEN, ODD])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('db_password = "s3cr3t-x"', 'db_password = "[REDACTED]"'),
        ("connect(password='abc123', user='bob')", "connect(password='[REDACTED]', user='bob')"),
        ("def f(api_key: str = 'zzzzzz'): pass", "def f(api_key: str = '[REDACTED]'): pass"),
        ('os.environ["OPENAI_API_KEY"] = "foo-bar-baz"', 'os.environ["OPENAI_API_KEY"] = "[REDACTED]"'),
        ('{"db_password": "hunter"}', '{"db_password": "[REDACTED]"}'),
        ('{"source": "token = \\"abcdef\\"\\nx=1"}', '{"source": "token = \\"[REDACTED]\\"\\nx=1"}'),
        ("%env API_KEY=abcdef123\nx=2", "%env API_KEY=[REDACTED]\nx=2"),
        ("API_KEY=abcdef123\nX=2", "API_KEY=[REDACTED]\nX=2"),
        ('headers = {"Authorization": "Bearer abcdefgh"}', 'headers = {"Authorization": "[REDACTED]"}'),
        ("tokenizer = 'bert-base'", "tokenizer = 'bert-base'"),
        ("author = 'Jane Doe'", "author = 'Jane Doe'"),
        ("x = 'plain'", "x = 'plain'"),
        ("xsk-proj-" + "a" * 30, "xsk-proj-" + "a" * 30),  # not at a word start: not a key
    ],
)
def test_literals_of_secret_names(text: str, expected: str) -> None:
    assert mask_secrets(text) == expected


def test_exact_hidden_values_in_every_textual_form() -> None:
    assert mask_secrets(f"print({HIDDEN})") == f"print({MASK})"
    assert mask_secrets(json.dumps({"v": ODD})) == json.dumps({"v": MASK})
    assert mask_secrets(repr(ODD)) == repr(MASK)
    assert mask_secrets("hunter2-") == "hunter2-"  # a prefix alone is not the value


def test_credential_shapes() -> None:
    key = "AIza" + "x" * 34 + "-"  # ends in '-': still a whole Google key
    assert mask_secrets(f"k = {key}.") == f"k = {MASK}."
    jwt = "eyJ" + "a" * 20 + ".eyJ" + "b" * 20 + "." + "c" * 20
    assert mask_secrets(f"auth {jwt} end") == f"auth {MASK} end"


def test_hidden_strings_of_containers_skip_plain_words() -> None:
    assert hidden_strings("hunter2-xyz") == ["hunter2-xyz"]
    found = hidden_strings({"user": "bob", "password": "hunter2-xyz", "city": "temperature", "t": "abc123def"})
    assert sorted(found) == ["abc123def", "hunter2-xyz"]
    assert hidden_strings(["temperature", "city"]) == []
    assert hidden_strings("temperature", sure=False) == []  # `for key in columns`: a column name
    assert hidden_strings("hunter2-xyz", sure=False) == ["hunter2-xyz"]


def test_clearly_secret_names() -> None:
    from mcp_notebook.redact import clearly_secret_name

    assert clearly_secret_name("db_password") and clearly_secret_name("OPENAI_API_KEY")
    assert clearly_secret_name("password") and clearly_secret_name("secret")
    assert not clearly_secret_name("key") and not clearly_secret_name("token")


def test_exit_point_masks_contents_descriptors_and_blobs() -> None:
    contents = Contents(uri="x://a", text=f"value {HIDDEN}", meta={"next": f"x://a?p={HIDDEN}"})
    out = contents.to_json("2025-11-25")
    assert HIDDEN not in json.dumps(out) and MASK in out["text"]
    blob = Contents(uri="x://b", blob=f"bytes {HIDDEN}".encode()).to_json("2025-11-25")
    assert HIDDEN.encode() not in base64.b64decode(blob["blob"])
    png = b"\x89PNG\r\n\x1a\n" + HIDDEN.encode()
    assert Contents(uri="x://c", blob=png).to_json("2025-11-25")["blob"] == base64.b64encode(png).decode()
    res = Resource(uri="x://r", name="r", title=f"t {HIDDEN}", description=f"d {HIDDEN}").to_json("2025-11-25")
    assert HIDDEN not in json.dumps(res)


def test_descriptors_built_before_the_hidden_set_grew_compare_unequal() -> None:
    before = Resource(uri="x://r", name="r", title="t")
    REDACTOR.add(["another-" + secrets.token_hex(4)])
    assert Resource(uri="x://r", name="r", title="t") != before
