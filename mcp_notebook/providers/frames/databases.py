"""DuckDB connections as resources: their tables and views, paged through the frame machinery.

``nb://db/{name}`` lists the tables and views of the DuckDB connection ``name`` (catalog metadata
only), ``nb://db/{name}/tables/{table}{?offset,limit,columns,format,count,sort,where}`` pages one of them and
``nb://db/{name}/tables/{table}/schema`` describes it, exactly as ``nb://frames`` does for a DuckDB
relation (``table`` may be ``schema.table``). Reads run on a cursor of their own (a separate
connection to the same database), bounded by ``MCPHub.engine_timeout`` and interrupted on expiry.
"""

from __future__ import annotations

import json
from typing import Any

from ...redact import mask_secrets
from ...types import Contents, Resource, ResourceTemplate
from ...uri import compile_template
from ..base import Provider, ResourceNotFound, ResourceReadError, rank_completions
from ..variables import Serves
from .engines import CONNECTION_LIBRARIES, EngineFrame, db_objects, db_relation, is_connection_type
from .pages import page_contents
from .schema import schema_contents

PREFIX = "nb://db/"
DB_TEMPLATE = "nb://db/{name}"
TABLE_TEMPLATE = "nb://db/{name}/tables/{table}{?offset,limit,columns,format,count,sort,where}"
TABLE_SCHEMA_TEMPLATE = "nb://db/{name}/tables/{table}/schema"
_DB = compile_template(DB_TEMPLATE)
_TABLE = compile_template(TABLE_TEMPLATE)
_TABLE_SCHEMA = compile_template(TABLE_SCHEMA_TEMPLATE + "{?columns,count,stats}")
_JSON = "application/json"


def db_uri(name: str) -> str:
    return PREFIX + name


def _key(entry: dict[str, Any]) -> str:
    return entry["name"] if entry["schema"] == "main" else f"{entry['schema']}.{entry['name']}"


class DatabasesProvider(Provider):
    """Tables and views of the DuckDB connections the VariablesProvider exposes."""

    uri_prefixes = (PREFIX,)

    rows_serve = Serves(libraries=CONNECTION_LIBRARIES)  # the values whose nb://vars rows it extends

    def __init__(self, variables: Any, limits: Any):
        self._vars = variables
        self._limits = limits

    def _connection(self, name: str, uri: str) -> Any:
        try:
            value = self._vars.value(name)
        except ResourceNotFound:
            raise ResourceNotFound(uri) from None
        if not is_connection_type(type(value)):
            raise ResourceNotFound(uri, f"{name} is not a DuckDB connection; see nb://vars/{name}")
        return value

    def _names(self) -> list[str]:
        return [n for n, cls in self._vars.exposed_items() if is_connection_type(cls)]

    def index_links(self, name: str, value: Any) -> dict[str, Any]:
        return {"db": db_uri(name)} if is_connection_type(type(value)) else {}

    # -- listing ------------------------------------------------------------------------
    def owns(self, uri: str) -> bool:
        return uri.startswith(PREFIX)

    def list_token(self) -> int:
        return self._vars.list_token()

    def list_resources(self) -> list[Resource]:
        return [
            Resource(
                uri=db_uri(name),
                name=f"db/{name}",
                title=f"{name} (DuckDB connection)",
                description=f"Tables and views of the DuckDB connection {name}, with columns; page one at "
                f"nb://db/{name}/tables/{{table}}",
                mime_type=_JSON,
            )
            for name in self._names()
        ]

    def list_templates(self) -> list[ResourceTemplate]:
        return [
            ResourceTemplate(
                uri_template=DB_TEMPLATE,
                name="database",
                title="Tables and views of a DuckDB connection",
                description="A DuckDB connection's catalog: its tables and views, with columns and dtypes.",
                mime_type=_JSON,
            ),
            ResourceTemplate(
                uri_template=TABLE_TEMPLATE,
                name="database-table",
                title="Rows of a DuckDB table or view",
                description="A page of a table or view (pushed down: projection, sort, filter, limit/offset); "
                "same parameters (sort=-a,b, where=a>=3;b~text) and page info as nb://frames.",
                mime_type="text/csv",
            ),
            ResourceTemplate(
                uri_template=TABLE_SCHEMA_TEMPLATE,
                name="database-table-schema",
                title="Schema of a DuckDB table or view",
                description="Columns and dtypes from the catalog; ?stats=true and ?count=true compute (bounded).",
                mime_type=_JSON,
            ),
        ]

    def complete(self, template: str, argument: str, value: str, context: dict[str, str]) -> list[str] | None:
        if template not in (DB_TEMPLATE, TABLE_TEMPLATE, TABLE_SCHEMA_TEMPLATE):
            return None
        if argument == "name":
            return rank_completions(self._names(), value)
        name = context.get("name")
        if not isinstance(name, str):
            return []
        try:
            objects = self._objects(name, db_uri(name))
        except Exception:
            return []
        if argument == "table":
            return rank_completions([_key(e) for e in objects], value)
        if argument == "columns":
            table = context.get("table")
            labels = [c["name"] for e in objects if _key(e) == table for c in e["columns"]]
            head, _, last = value.rpartition(",")
            chosen = set(head.split(",")) if head else set()
            prefix = head + "," if head else ""
            return [prefix + c for c in rank_completions(labels, last) if c not in chosen]
        return []

    # -- reading ------------------------------------------------------------------------
    def _objects(self, name: str, uri: str) -> list[dict[str, Any]]:
        return db_objects(self._connection(name, uri), self._limits.engine_timeout)

    def read(self, uri: str) -> list[Contents]:
        params = _DB.match(uri)
        if params is not None:
            return [self._read_db(uri, params["name"])]
        params = _TABLE_SCHEMA.match(uri)
        if params is not None:
            name, table = params["name"], params["table"]
            frame = self._frame(uri, name, table)
            page = f"{PREFIX}{name}/tables/{table}"
            return [schema_contents(uri, params, frame, table, self._limits, page, f"{page}/schema")]
        params = _TABLE.match(uri)
        if params is None:
            raise ResourceNotFound(uri)
        name, table = params["name"], params["table"]
        frame = self._frame(uri, name, table)

        def page_uri(p: dict[str, Any]) -> str:
            return _TABLE.expand({"name": name, "table": table, **p})

        return page_contents(uri, params, frame, table, self._limits, page_uri, f"{PREFIX}{name}/tables/{table}/schema")

    def _read_db(self, uri: str, name: str) -> Contents:
        objects = self._objects(name, uri)
        tables = []
        for entry in objects:
            key = _key(entry)
            base = f"{PREFIX}{name}/tables/{key}"
            tables.append({**entry, "name": mask_secrets(key), "page": base, "schema_uri": base + "/schema"})
        doc = {"name": name, "type": "duckdb.DuckDBPyConnection", "count": len(tables), "tables": tables}
        text = json.dumps(doc, ensure_ascii=False, default=str)
        cap = self._limits.max_read_chars
        while len(text) > cap and doc["tables"]:
            doc["tables"] = doc["tables"][: len(doc["tables"]) // 2]
            doc["truncated"] = True
            text = json.dumps(doc, ensure_ascii=False, default=str)
        return Contents(uri=uri, mime_type=_JSON, text=text)

    def _frame(self, uri: str, name: str, table: str) -> EngineFrame:
        con = self._connection(name, uri)
        known = {_key(e) for e in self._objects(name, uri)}
        if table not in known:
            raise ResourceNotFound(uri, f"no table or view {table!r} in {name}; see {db_uri(name)}")
        try:
            relation, cursor = db_relation(con, table)
        except Exception as exc:
            raise ResourceReadError(f"opening {table} in {name} failed: {type(exc).__name__}: {exc}") from None
        return EngineFrame(relation, "duckdb", self._limits.engine_timeout, lambda: [cursor])

    # -- change detection: catalog changes are not tracked per cell (that would query the engine);
    # the base's snapshot is kept, so the hub does not call it after a cell (issue #48) --
