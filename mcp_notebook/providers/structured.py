"""Structured values: pydantic models, dataclasses, attrs instances and TypedDict-shaped dicts.

Detection is cheap and imports nothing: a pydantic model can only exist once pydantic is in
``sys.modules``; dataclasses and attrs classes carry marker attributes. pydantic is imported
only to dump such a value as JSON or to derive its JSON Schema, i.e. on a read.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import json
import sys
import typing
import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..guard import RenderTimeout, call_guarded, safe_str
from ..redact import MASK, mask_secrets
from ..types import Contents
from .base import ResourceNotFound, ResourceReadError

_LIST_SAMPLE = 20  # items of a list looked at to decide it holds structured values
# The types this module reads (told from the type alone, so other values never enter it): instances of
# pydantic models, dataclasses and attrs classes, lists and tuples of them, dicts a TypedDict describes.
SERVES_MARKERS = ("__dataclass_fields__", "__attrs_attrs__")


def _pydantic_model_class(cls: Any) -> bool:
    pyd = sys.modules.get("pydantic")
    if pyd is None or not isinstance(cls, type):
        return False
    main = sys.modules.get("pydantic.main")
    base = getattr(main, "BaseModel", None)
    return base is not None and issubclass(cls, base)


def class_kind(cls: Any) -> str | None:
    """'pydantic', 'dataclass', 'attrs' or 'typeddict' for a class, else None (no imports)."""
    if not isinstance(cls, type):
        return None
    if _pydantic_model_class(cls):
        return "pydantic"
    if dataclasses.is_dataclass(cls):
        return "dataclass"
    if getattr(cls, "__attrs_attrs__", None) is not None:
        return "attrs"
    if is_typeddict(cls):
        return "typeddict"
    return None


def is_typeddict(obj: Any) -> bool:
    if not isinstance(obj, type) or not issubclass(obj, dict):
        return False
    return hasattr(obj, "__required_keys__") and hasattr(obj, "__annotations__") and hasattr(obj, "__total__")


def value_kind(value: Any) -> str | None:
    """The kind of a structured instance (a class itself is not one), else None."""
    cls = type(value)
    if cls is dict or isinstance(value, type):
        return None
    kind = class_kind(cls)
    return kind if kind != "typeddict" else None


def list_item_class(value: Any) -> type | None:
    """The class of a non-empty list/tuple whose (sampled) items are all one structured class."""
    if type(value) not in (list, tuple) or not value:
        return None
    first = type(value[0])
    if value_kind(value[0]) is None:
        return None
    step = max(1, len(value) // _LIST_SAMPLE)
    if all(type(v) is first for v in value[::step]) and type(value[-1]) is first:
        return first
    return None


def is_structured_type(annotation: Any) -> bool:
    """A model/dataclass/attrs/TypedDict class, or a list/sequence of one (for return annotations)."""
    if annotation is None:
        return False
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return is_structured_type(typing.get_args(annotation)[0])
    if origin in (list, tuple, Iterable, typing.Sequence) or (
        origin is not None and getattr(origin, "__name__", "") in ("Sequence", "list")
    ):
        args = [a for a in typing.get_args(annotation) if a is not Ellipsis]
        return len(args) == 1 and class_kind(args[0]) is not None
    return class_kind(annotation) is not None


def shape_of(value: Any, name: str, ns: Mapping[str, Any]) -> tuple[str, type, bool] | None:
    """(kind, class, is_list) of a structured variable, else None. Cheap: no import, no user code."""
    kind = value_kind(value)
    if kind is not None:
        return kind, type(value), False
    item = list_item_class(value)
    if item is not None:
        return class_kind(item) or "", item, True
    td = typeddict_for(value, name, ns)
    if td is not None:
        return "typeddict", td, False
    return None


def schema_shape(value: Any, name: str, ns: Mapping[str, Any]) -> tuple[str, type, bool] | None:
    """Like :func:`shape_of`, and a model/dataclass/attrs/TypedDict class itself has a schema too."""
    if isinstance(value, type):
        kind = class_kind(value)
        return (kind, value, False) if kind is not None else None
    return shape_of(value, name, ns)


def var_document(
    value: Any, shape: tuple[str, type, bool], budget: int, looks_secret: Callable[[str], bool]
) -> dict[str, Any]:
    """The fields a structured variable's read adds: kind, class, bounded JSON value, truncation."""
    kind, cls, many = shape
    out: dict[str, Any] = {"kind": f"list of {kind}" if many else kind, "class": f"{cls.__module__}.{cls.__qualname__}"}
    if many:
        items, cut, size = [], False, 0
        for item in value:  # dump item by item: a long list costs only what fits
            data = to_jsonable(item)
            size += len(json.dumps(data, ensure_ascii=False, default=str)) + 2
            if size > budget + 512 and items:
                cut = True
                break
            items.append(data)
        data, cut2 = bound_and_mask(items, budget, looks_secret)
        cut = cut or cut2
        if cut:
            out["items_shown"] = len(data)
    else:
        raw, sliced = _to_jsonable_sliced(value, max(100, budget // 4))
        data, cut = bound_and_mask(raw, budget, looks_secret)
        cut = cut or sliced
    out["value"] = data
    if cut:
        out["truncated"] = True
    return out


def index_fields(name: str, value: Any, ns: Mapping[str, Any], schema_uri: str) -> dict[str, Any]:
    """``kind`` and ``schema`` for an nb://vars index row of a structured value (no namespace scan)."""
    kind = value_kind(value)
    if kind is None and list_item_class(value) is not None:
        kind = "list of " + (class_kind(list_item_class(value)) or "")
    if kind is None and type(value) is dict:
        annotations = ns.get("__annotations__")
        if isinstance(annotations, dict) and is_typeddict(annotations.get(name)):
            kind = "typeddict"
    return {"kind": kind, "schema": schema_uri} if kind else {}


def var_schema(shape: tuple[str, type, bool]) -> dict[str, Any]:
    _kind, cls, many = shape
    return schema_for_class(cls, many=many)


def structured_names(names: Iterable[str], ns: Mapping[str, Any]) -> list[str]:
    """The names among ``names`` whose values are structured (one namespace scan for TypedDicts)."""
    typeddicts = [obj for obj in list(ns.values()) if is_typeddict(obj)]
    out = []
    for name in names:
        value = ns.get(name)
        if value_kind(value) is not None or list_item_class(value) is not None or class_kind(value) is not None:
            out.append(name)
        elif type(value) is dict and typeddict_for(value, name, ns, typeddicts) is not None:
            out.append(name)
    return out


def typeddict_for(value: Any, name: str, ns: Mapping[str, Any], candidates: list[type] | None = None) -> type | None:
    """The TypedDict a plain dict is declared as (``x: Movie = ...``) or whose keys it matches."""
    if type(value) is not dict:
        return None
    annotations = ns.get("__annotations__")
    if isinstance(annotations, dict):
        declared = annotations.get(name)
        if is_typeddict(declared):
            return declared
    if not value or len(value) > 1000 or not all(type(k) is str for k in value):
        return None
    keys = set(value)
    best: type | None = None
    for obj in candidates if candidates is not None else list(ns.values()):
        if is_typeddict(obj):
            required = set(getattr(obj, "__required_keys__", ()))
            allowed = required | set(getattr(obj, "__optional_keys__", ()))
            if required <= keys <= allowed and (best is None or len(allowed) < len(_keys(best))):
                best = obj
    return best


def _keys(td: type) -> set[str]:
    return set(getattr(td, "__required_keys__", ())) | set(getattr(td, "__optional_keys__", ()))


def to_jsonable(value: Any) -> Any:
    """A model/dataclass/attrs instance (or a list of them) as plain JSON data (pydantic's JSON mode)."""
    from pydantic_core import to_jsonable_python

    return to_jsonable_python(_attrs_to_dict(value), by_alias=False, fallback=_fallback, serialize_unknown=True)


_SIZED = (list, tuple, dict, set, frozenset)


def _to_jsonable_sliced(value: Any, max_items: int) -> tuple[Any, bool]:
    """Like :func:`to_jsonable`, but a field holding a huge builtin container is cut before dumping.

    Dumping is O(size): a dataclass with a 10-million-item list must not be dumped whole to show
    its first page. Only top-level fields are looked at; without a huge one the value is dumped
    as is (its own serializers and computed fields apply).
    """
    kind = value_kind(value)
    if kind == "pydantic":
        names = list(type(value).model_fields)
    elif kind == "dataclass":
        names = [f.name for f in dataclasses.fields(value)]
    elif kind == "attrs":
        names = [f.name for f in type(value).__attrs_attrs__]
    else:
        return to_jsonable(value), False
    fields = {name: getattr(value, name, None) for name in names}
    if not any(type(v) in _SIZED and len(v) > max_items for v in fields.values()):
        return to_jsonable(value), False
    out = {}
    for name, item in fields.items():
        if type(item) in _SIZED and len(item) > max_items:
            item = (
                dict(itertools.islice(item.items(), max_items))
                if type(item) is dict
                else list(itertools.islice(item, max_items))
            )
        out[name] = to_jsonable(item)
    return out, True


def _fallback(obj: Any) -> Any:
    converted = _attrs_to_dict(obj)
    return converted if converted is not obj else str(obj)


def _attrs_to_dict(value: Any) -> Any:
    """attrs instances as dicts (pydantic has no attrs support); other values unchanged."""
    fields = getattr(type(value), "__attrs_attrs__", None)
    if fields is not None and not isinstance(value, type):
        return {f.name: _attrs_to_dict(getattr(value, f.name, None)) for f in fields}
    if type(value) in (list, tuple) and value and getattr(type(value[0]), "__attrs_attrs__", None) is not None:
        return [_attrs_to_dict(v) for v in value]
    return value


_SCHEMAS: weakref.WeakKeyDictionary[type, dict[bool, dict[str, Any]]] = weakref.WeakKeyDictionary()


def schema_for_class(cls: type, *, many: bool = False) -> dict[str, Any]:
    """JSON Schema (serialization mode) of a model/dataclass/attrs/TypedDict class, or of a list of it.

    Cached per class (weakly: a class redefined in a later cell is a new key, the old one goes).
    """
    try:
        cached = _SCHEMAS.get(cls, {}).get(many)
    except TypeError:
        cached = None
    if cached is None:
        cached = _schema_for_class(cls, many)
        try:
            _SCHEMAS.setdefault(cls, {})[many] = cached
        except TypeError:
            pass
    return copy.deepcopy(cached)


def _schema_for_class(cls: type, many: bool) -> dict[str, Any]:
    from pydantic import TypeAdapter

    kind = class_kind(cls)
    if kind == "pydantic" and not many:
        return cls.model_json_schema(mode="serialization", by_alias=False)
    target: Any = _attrs_model(cls) if kind == "attrs" else cls
    try:
        return TypeAdapter(list[target] if many else target).json_schema(mode="serialization", by_alias=False)
    except Exception:
        if kind != "typeddict":
            raise
    # pydantic refuses typing.TypedDict before Python 3.12: mirror its keys in a model
    target = _typeddict_model(cls)
    return TypeAdapter(list[target] if many else target).json_schema(mode="serialization", by_alias=False)


def _typeddict_model(td: type) -> Any:
    import pydantic

    try:
        hints = typing.get_type_hints(td, include_extras=True)
    except Exception:
        hints = {k: v for k, v in td.__annotations__.items() if not isinstance(v, str)}
    required = set(getattr(td, "__required_keys__", ()))
    fields = {k: (hints.get(k, Any), ... if k in required else None) for k in td.__annotations__}
    model = pydantic.create_model(td.__name__, __config__=pydantic.ConfigDict(arbitrary_types_allowed=True), **fields)
    model.__doc__ = td.__doc__
    return model


def mask_schema(schema: Any, looks_secret: Callable[[str], bool]) -> Any:
    """A JSON Schema with credential-shaped strings masked and no defaults/examples of secret-named fields."""

    def walk(obj: Any, secret: bool) -> Any:
        if isinstance(obj, str):
            return mask_secrets(obj)
        if isinstance(obj, list):
            return [walk(v, secret) for v in obj]
        if isinstance(obj, dict):
            out = {}
            for key, value in obj.items():
                if secret and key in ("default", "examples", "const", "enum"):
                    continue
                if key == "properties" and isinstance(value, dict):
                    out[key] = {k: walk(v, looks_secret(str(k))) for k, v in value.items()}
                else:
                    out[key] = walk(value, False)
            return out
        return obj

    return walk(schema, False)


def schema_for_annotation(annotation: Any) -> dict[str, Any]:
    from pydantic import TypeAdapter

    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return schema_for_annotation(typing.get_args(annotation)[0])
    if origin is not None:
        args = [a for a in typing.get_args(annotation) if a is not Ellipsis]
        if len(args) == 1 and class_kind(args[0]) is not None:
            return schema_for_class(args[0], many=True)
    if isinstance(annotation, type) and class_kind(annotation) is not None:
        return schema_for_class(annotation)
    return TypeAdapter(annotation).json_schema(mode="serialization", by_alias=False)


def _attrs_model(cls: type) -> Any:
    """A pydantic model mirroring an attrs class's fields (types from its annotations)."""
    import pydantic

    try:
        hints = typing.get_type_hints(cls)
    except Exception:
        hints = {}
    fields: dict[str, Any] = {}
    for f in cls.__attrs_attrs__:
        annotation = hints.get(f.name, f.type if f.type is not None and not isinstance(f.type, str) else Any)
        default = f.default
        factory = getattr(default, "factory", None)
        if factory is not None and type(default).__name__ == "Factory":
            fields[f.name] = (annotation, pydantic.Field(default_factory=factory))
        elif type(default).__name__ == "_Nothing":  # attrs.NOTHING: a required field
            fields[f.name] = (annotation, ...)
        else:
            fields[f.name] = (annotation, default)
    model = pydantic.create_model(cls.__name__, **fields)
    model.__doc__ = cls.__doc__
    return model


def bound_and_mask(data: Any, budget: int, looks_secret: Callable[[str], bool]) -> tuple[Any, bool]:
    """Cut JSON data to about ``budget`` characters (long strings and lists shortened) and mask secrets.

    A field whose name looks like a credential gets ``[REDACTED]``; credential-shaped strings
    anywhere are masked like every other read. Returns the data and whether anything was cut.
    """
    state = {"left": budget, "cut": False}

    def walk(obj: Any, depth: int) -> Any:
        if state["left"] <= 0:
            state["cut"] = True
            return "…"
        if isinstance(obj, str):
            text = mask_secrets(obj[: max(0, state["left"]) + 512])
            if len(text) > state["left"]:
                text, state["cut"] = text[: max(1, state["left"])] + "…", True
            state["left"] -= len(text) + 4
            return text
        if isinstance(obj, dict):
            out = {}
            for key, item in obj.items():
                if state["left"] <= 0:
                    state["cut"] = True
                    break
                key = str(key)
                state["left"] -= len(key) + 4
                if isinstance(item, (str, int, float)) and not isinstance(item, bool) and looks_secret(key):
                    out[key] = MASK
                    state["left"] -= len(MASK)
                else:
                    out[key] = walk(item, depth + 1) if depth < 64 else "…"
            return out
        if isinstance(obj, list):
            out_list = []
            for item in obj:
                if state["left"] <= 0:
                    state["cut"] = True
                    break
                out_list.append(walk(item, depth + 1) if depth < 64 else "…")
            return out_list
        state["left"] -= len(str(obj)) + 2
        return obj

    result = walk(data, 0)
    return result, bool(state["cut"])


def read_document(
    name: str, value: Any, shape: tuple[str, type, bool], cap: int, timeout: float, looks_secret: Callable[[str], bool]
) -> dict[str, Any]:
    """nb://vars/{name} of a structured value: its bounded, masked document, guarded."""
    try:
        return call_guarded(lambda: var_document(value, shape, cap, looks_secret), timeout)
    except RenderTimeout as exc:
        raise ResourceReadError(f"dumping {name} did not finish: {exc}") from None
    except Exception as exc:
        raise ResourceReadError(f"dumping {name} raised {type(exc).__name__}: {safe_str(exc, timeout)}") from None


def read_schema(
    uri: str, name: str, value: Any, ns: Mapping[str, Any], timeout: float, looks_secret: Callable[[str], bool]
) -> Contents:
    """nb://vars/{name}/schema: the JSON Schema of a structured value or class, masked."""
    shape = schema_shape(value, name, ns)
    if shape is None:
        raise ResourceNotFound(
            uri, f"{name} is not a pydantic model, dataclass, attrs or TypedDict (class, instance or list)"
        )
    try:
        schema = call_guarded(lambda: var_schema(shape), timeout)
        schema = mask_schema(schema, looks_secret)
    except Exception as exc:
        raise ResourceReadError(f"no JSON Schema for {name}: {type(exc).__name__}: {safe_str(exc, 1.0)}") from None
    return Contents(uri=uri, mime_type="application/schema+json", text=json.dumps(schema, ensure_ascii=False))
