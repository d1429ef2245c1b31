"""Typed resources and structured values, through the official SDK client against a real kernel."""

from __future__ import annotations

import json
import warnings
from typing import Literal

import anyio
import mcp_types as types
import pytest
from kernel_harness import Kernel
from mcp import MCPError
from sdk import connect

SALES = "data://sales/{region}/{year}{?color,detail}"

SETUP = '''
import dataclasses, datetime, enum
from typing import Annotated, Literal, TypedDict
import attrs
from pydantic import BaseModel, Field, SecretStr
import mcp_notebook

class Color(enum.Enum):
    red = "r"
    blue = "b"

class Sale(BaseModel):
    region: str
    year: int
    amount: float
    day: datetime.date

calls = []

@mcp_notebook.resource(__SALES__)
def sales(
    region: Literal["emea", "apac"],
    year: Annotated[int, Field(ge=2000, description="Fiscal year, four digits")],
    color: Color = Color.red,
    detail: bool = False,
) -> list[Sale]:
    """Sales rows of one region.

    Args:
        region: The sales region.
        detail: Whether to include
            the detail rows.
    """
    calls.append((region, year, color, detail))
    return [Sale(region=region, year=year, amount=1.5, day=datetime.date(year, 1, 2))]

@mcp_notebook.resource("data://letters/{letter}", complete={"letter": ["x", "y"]})
def letters(letter: Literal["a", "b"]) -> str:
    return letter

@mcp_notebook.resource("data://untyped/{n}")
def untyped(n):
    return f"n={n!r}"

class Opaque:
    def __init__(self, raw):
        self.raw = raw

@mcp_notebook.resource("data://opaque/{thing}/{n}")
def opaque(thing: Opaque, n: int) -> dict:
    return {"thing": thing, "n": n, "sale": Sale(region="x", year=2001, amount=2.0, day=datetime.date(2001, 1, 1))}

@dataclasses.dataclass
class Point:
    x: int
    y: int

@mcp_notebook.resource("data://point")
def point():
    return Point(1, 2)

class Profile(BaseModel):
    name: str
    bio: str
    api_key: str = "plain-but-secret-named"
    password: SecretStr = SecretStr("hunter2")
    created: datetime.date = datetime.date(2024, 5, 6)

@dataclasses.dataclass
class Run:
    model: str
    scores: list[float]
    owner: Profile

@attrs.define
class Job:
    id: int
    tags: list[str] = attrs.Factory(list)

class Movie(TypedDict):
    title: str
    year: int

profile = Profile(name="ada", bio="my key is sk-__FAKE__")
run = Run(model="m1", scores=[0.5, 0.75], owner=Profile(name="bob", bio="hi"))
job = Job(7, ["a"])
movie = Movie(title="Alien", year=1979)
annotated_movie: Movie = {"title": "Heat", "year": 1995}
runs = [Run(model=f"m{i}", scores=[float(i)] * 50, owner=Profile(name="x", bio="y")) for i in range(3000)]
plain_dict = {"q": 1}
big_run = Run(model="big", scores=list(range(2_000_000)), owner=Profile(name="x", bio="y"))
'''.replace("__SALES__", repr(SALES)).replace("__FAKE__", "A" * 40)


@pytest.fixture(scope="module")
def typed_hub(kernel, hub):
    kernel.run(SETUP)
    return hub


def run(fn):
    return anyio.run(fn)


def _text(result) -> str:
    return result.contents[0].text


async def _complete(client, template: str, name: str, value: str) -> list[str]:
    ref = types.ResourceTemplateReference(type="ref/resource", uri=template)
    result = await client.complete(ref, {"name": name, "value": value})
    return list(result.completion.values)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_valid_arguments_are_converted_and_models_served_as_json(kernel, typed_hub, mode):
    async def go():
        async with connect(typed_hub, mode) as (client, _):
            read = await client.read_resource("data://sales/emea/2024?color=b&detail=true")
            item = read.contents[0]
            assert item.mime_type == "application/json"
            assert json.loads(item.text) == [{"region": "emea", "year": 2024, "amount": 1.5, "day": "2024-01-02"}]
            if mode == "legacy":  # 2025-11-25 carries _meta on contents
                assert item.meta["mcp-notebook/schema"] == "nb://schemas/sales"
            schema = json.loads(_text(await client.read_resource("nb://schemas/sales")))
            assert schema["type"] == "array"
            sale = schema["$defs"]["Sale"]
            assert set(sale["required"]) == {"region", "year", "amount", "day"}
            assert sale["properties"]["day"]["format"] == "date"

    run(go)
    calls = kernel.run("print(repr(calls[-1]))").stdout.strip()
    assert calls == "('emea', 2024, <Color.blue: 'b'>, True)"


@pytest.mark.parametrize(
    ("uri", "param", "words"),
    [
        ("data://sales/mars/2024", "region", "'emea' or 'apac'"),
        ("data://sales/emea/1999", "year", "greater than or equal to 2000"),
        ("data://sales/emea/twenty", "year", "valid integer"),
        ("data://sales/apac/2024?color=green", "color", "'r' or 'b'"),
        ("data://sales/apac/2024?detail=maybe", "detail", "valid boolean"),
    ],
)
def test_bad_arguments_are_invalid_params_and_user_code_does_not_run(kernel, typed_hub, uri, param, words):
    before = kernel.run("print(len(calls))").stdout.strip()

    async def go():
        async with connect(typed_hub, "auto") as (client, _):
            with pytest.raises(MCPError) as info:
                await client.read_resource(uri)
            assert info.value.error.code == -32602
            message = info.value.error.message
            assert f"{param}: " in message and words in message, message

    run(go)
    assert kernel.run("print(len(calls))").stdout.strip() == before


def test_bad_argument_in_handshake_era_too(typed_hub):
    async def go():
        async with connect(typed_hub, "legacy") as (client, _):
            with pytest.raises(MCPError) as info:
                await client.read_resource("data://sales/emea/1800")
            assert info.value.error.code == -32602 and "year" in info.value.error.message

    run(go)


def test_completions_from_literal_enum_and_bool(typed_hub):
    async def go():
        async with connect(typed_hub, "auto") as (client, _):
            assert await _complete(client, SALES, "region", "") == ["emea", "apac"]
            assert await _complete(client, SALES, "region", "a") == ["apac"]
            assert await _complete(client, SALES, "color", "") == ["r", "b"]
            assert await _complete(client, SALES, "detail", "f") == ["false"]
            assert await _complete(client, SALES, "year", "20") == []
            # an explicit complete= wins over the type's values
            assert await _complete(client, "data://letters/{letter}", "letter", "") == ["x", "y"]

    run(go)


def test_template_description_lists_parameters(typed_hub):
    async def go():
        async with connect(typed_hub, "legacy") as (client, _):
            listed = await client.list_resource_templates()
            by_uri = {t.uri_template: t for t in listed.resource_templates}
            desc = by_uri[SALES].description
            assert desc.startswith("Sales rows of one region.")
            assert "region (one of emea, apac): The sales region." in desc
            assert "year (integer, >= 2000): Fiscal year, four digits" in desc
            assert "detail (one of true, false, default false): Whether to include the detail rows." in desc
            assert "nb://schemas/sales" in desc
            assert by_uri[SALES].meta["mcp-notebook/schema"] == "nb://schemas/sales"
            assert "nb://schemas/{name}" in by_uri and "nb://vars/{name}/schema" in by_uri
            resources = {str(r.uri) for r in (await client.list_resources()).resources}
            assert "nb://schemas/sales" in resources

    run(go)


def test_untyped_function_unchanged_and_returned_dataclass_is_json(typed_hub):
    async def go():
        async with connect(typed_hub, "auto") as (client, _):
            assert _text(await client.read_resource("data://untyped/42")) == "n='42'"
            point = await client.read_resource("data://point")
            assert point.contents[0].mime_type == "application/json"
            assert json.loads(_text(point)) == {"x": 1, "y": 2}
            schema = json.loads(_text(await client.read_resource("nb://schemas/point")))
            assert schema["properties"]["x"]["type"] == "integer" and schema["title"] == "Point"
            assert "point" in await _complete(client, "nb://schemas/{name}", "name", "p")
            # a class pydantic cannot validate gets the raw text; models nested in a dict are JSON
            doc = json.loads(_text(await client.read_resource("data://opaque/abc/3")))
            assert doc == {
                "thing": "abc",
                "n": 3,
                "sale": {"region": "x", "year": 2001, "amount": 2.0, "day": "2001-01-01"},
            }

    run(go)


def test_model_and_dataclass_variables_as_json_with_schemas(typed_hub):
    async def go():
        async with connect(typed_hub, "auto") as (client, _):
            doc = json.loads(_text(await client.read_resource("nb://vars/profile")))
            assert doc["kind"] == "pydantic" and doc["schema"] == "nb://vars/profile/schema"
            value = doc["value"]
            assert value["name"] == "ada" and value["created"] == "2024-05-06"
            assert value["bio"] == "my key is [REDACTED]"  # credential inside a field
            assert value["api_key"] == "[REDACTED]"  # secret-named field
            assert "hunter2" not in json.dumps(doc)  # SecretStr stays hidden
            schema = json.loads(_text(await client.read_resource("nb://vars/profile/schema")))
            assert schema["title"] == "Profile" and "created" in schema["properties"]
            assert "plain-but-secret-named" not in json.dumps(schema)

            doc = json.loads(_text(await client.read_resource("nb://vars/run")))
            assert doc["kind"] == "dataclass"
            assert doc["value"]["scores"] == [0.5, 0.75] and doc["value"]["owner"]["name"] == "bob"
            schema = json.loads(_text(await client.read_resource("nb://vars/run/schema")))
            assert schema["title"] == "Run" and "Profile" in schema["$defs"]

            doc = json.loads(_text(await client.read_resource("nb://vars/job")))
            assert doc["kind"] == "attrs" and doc["value"] == {"id": 7, "tags": ["a"]}
            schema = json.loads(_text(await client.read_resource("nb://vars/job/schema")))
            assert schema["properties"]["id"]["type"] == "integer" and schema["required"] == ["id"]

            for name, title in (("movie", "Alien"), ("annotated_movie", "Heat")):
                doc = json.loads(_text(await client.read_resource(f"nb://vars/{name}")))
                assert doc["kind"] == "typeddict" and doc["value"]["title"] == title
                schema = json.loads(_text(await client.read_resource(f"nb://vars/{name}/schema")))
                assert schema["title"] == "Movie" and set(schema["required"]) == {"title", "year"}

            doc = json.loads(_text(await client.read_resource("nb://vars/plain_dict")))
            assert doc["repr"] == "{'q': 1}" and "value" not in doc  # a plain dict reads as before
            with pytest.raises(MCPError):
                await client.read_resource("nb://vars/plain_dict/schema")

            index = json.loads(_text(await client.read_resource("nb://vars?limit=1000")))
            rows = {r["name"]: r for r in index["variables"]}
            assert rows["profile"]["kind"] == "pydantic" and rows["profile"]["schema"] == "nb://vars/profile/schema"
            assert rows["runs"]["kind"] == "list of dataclass" and rows["job"]["kind"] == "attrs"
            assert rows["annotated_movie"]["kind"] == "typeddict" and "kind" not in rows["plain_dict"]

            # the classes themselves have schemas too
            schema = json.loads(_text(await client.read_resource("nb://vars/Profile/schema")))
            assert schema["title"] == "Profile" and schema["properties"]["created"]["format"] == "date"
            schema = json.loads(_text(await client.read_resource("nb://vars/Movie/schema")))
            assert set(schema["required"]) == {"title", "year"}

            names = await _complete(client, "nb://vars/{name}/schema", "name", "")
            assert {"profile", "run", "job", "movie", "annotated_movie", "runs", "Profile", "Job"} <= set(names)
            assert "plain_dict" not in names and "calls" not in names

    run(go)


def test_list_of_models_is_bounded(typed_hub):
    async def go():
        async with connect(typed_hub, "auto") as (client, _):
            text = _text(await client.read_resource("nb://vars/runs"))
            assert len(text) <= 61000
            doc = json.loads(text)
            assert doc["truncated"] is True and 10 < doc["items_shown"] < 3000
            assert doc["value"][0]["model"] == "m0"
            text = _text(await client.read_resource("nb://vars/big_run"))  # one field with 2M items
            doc = json.loads(text)
            assert len(text) <= 61000 and doc["truncated"] is True and doc["value"]["scores"][:3] == [0, 1, 2]
            schema = json.loads(_text(await client.read_resource("nb://vars/runs/schema")))
            assert schema["type"] == "array" and schema["items"]["$ref"].endswith("/Run")

    run(go)


def test_subscribed_model_variable_updates_after_mutation(kernel, typed_hub):
    async def go():
        async with connect(typed_hub, "legacy") as (client, inbox):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                await client.subscribe_resource("nb://vars/job")
            await anyio.to_thread.run_sync(kernel.run, "job.id = 8")
            await inbox.wait_for(lambda i: "nb://vars/job" in i.updated, timeout=30)
            doc = json.loads(_text(await client.read_resource("nb://vars/job")))
            assert doc["value"]["id"] == 8

    run(go)


def test_loading_does_not_import_pydantic(tmp_path):
    """A fresh kernel: load, run cells, list and read untyped things; pydantic stays unimported."""
    k = Kernel(env={"JUPYTER_RUNTIME_DIR": str(tmp_path)})
    try:
        info = k.load_hub()
        k.run(
            "import mcp_notebook, dataclasses\n"
            "@mcp_notebook.resource('data://plain/{n}')\n"
            "def plain(n: str) -> str:\n    return n\n"
            "@dataclasses.dataclass\nclass P:\n    x: int\n"
            "nums = [1, 2, 3]\nd = {'a': 1}\n"
        )

        async def go():
            async with connect(info, "auto") as (client, _):
                await client.list_resources()
                await client.list_resource_templates()
                assert _text(await client.read_resource("data://plain/7")) == "7"
                await client.read_resource("nb://vars/nums")
                await client.read_resource("nb://vars/d")
                await _complete(client, "nb://vars/{name}/schema", "name", "")

        run(go)
        out = k.run(
            "import sys; print(sorted(m for m in sys.modules if m.split('.')[0] in ('pydantic', 'pydantic_core', 'attr', 'attrs')))"
        )
        assert out.stdout.strip() == "[]"
        # reading a dataclass value is what brings pydantic in
        k.run("p = P(1)")

        async def read_dataclass():
            async with connect(info, "auto") as (client, _):
                doc = json.loads(_text(await client.read_resource("nb://vars/p")))
                assert doc["value"] == {"x": 1}

        run(read_dataclass)
    finally:
        k.shutdown()


def test_contents_objects_still_pass_through():
    """Contents is itself a dataclass: it must not be dumped as a structured value."""
    from mcp_notebook.providers.custom import CustomProvider, make_registration
    from mcp_notebook.types import Contents

    provider = CustomProvider()

    def one():
        return Contents(uri="x://one", mime_type="text/markdown", text="# hi")

    def many():
        return [Contents(uri="x://many", text="a"), Contents(uri="x://many#2", text="b")]

    for uri, fn in (("x://one", one), ("x://many", many)):
        provider.register(
            make_registration(uri, fn, name=None, title=None, description=None, mime_type=None, annotations=None)
        )
    assert provider.read("x://one") == [one()]
    assert provider.read("x://many") == many()


def test_docstring_styles_and_parameter_names_that_pydantic_reserves():
    from mcp_notebook.providers.base import InvalidResourceParams
    from mcp_notebook.providers.custom import CustomProvider, make_registration

    def numpy_style(schema: int, model_id: Literal["a", "b"] = "a"):
        """Numpy style.

        Parameters
        ----------
        schema : int
            Which schema,
            by number.
        model_id : str
            The model.
        """
        return {"schema": schema, "model_id": model_id}

    def sphinx_style(json: bool):
        """Sphinx style.

        :param json: Whether to answer JSON.
        """
        return {"json": json}

    provider = CustomProvider()
    for uri, fn in (("x://n/{schema}{?model_id}", numpy_style), ("x://s/{json}", sphinx_style)):
        provider.register(
            make_registration(uri, fn, name=None, title=None, description=None, mime_type=None, annotations=None)
        )
    descriptions = {t.uri_template: t.description for t in provider.list_templates()}
    assert "- schema (integer): Which schema, by number." in descriptions["x://n/{schema}{?model_id}"]
    assert '- model_id (one of a, b, default "a"): The model.' in descriptions["x://n/{schema}{?model_id}"]
    assert "- json (one of true, false): Whether to answer JSON." in descriptions["x://s/{json}"]
    assert json.loads(provider.read("x://n/3")[0].text) == {"schema": 3, "model_id": "a"}
    assert json.loads(provider.read("x://s/false")[0].text) == {"json": False}
    with pytest.raises(InvalidResourceParams, match="schema: Input should be a valid integer"):
        provider.read("x://n/three")
