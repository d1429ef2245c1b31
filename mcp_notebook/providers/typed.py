"""Typed resource functions: template arguments validated by pydantic, completions from the types.

Built once at registration from the function's type hints. Only functions whose template
parameters are annotated with something other than ``str`` (or whose return annotation is a
model, dataclass or a list of them) take this path; pydantic is imported here and nowhere on the
untyped path.
"""

from __future__ import annotations

import enum
import inspect
import json
import re
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import structured
from .base import InvalidResourceParams

_PLAIN = (inspect.Parameter.empty, str, Any, "str", "Any", "typing.Any")
_SECTION = re.compile(r"^\s*(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments):?\s*$")
_GOOGLE_ITEM = re.compile(r"^(\s*)\*{0,2}(\w+)\s*(?:\(([^)]*)\))?\s*:\s*(.*)$")
_NUMPY_ITEM = re.compile(r"^(\s*)(\w+)\s*(?::\s*(.*))?$")
_SPHINX_ITEM = re.compile(r"^\s*:param\s+(?:[^:]*\s)?(\w+)\s*:\s*(.*)$")


@dataclass(slots=True)
class TypedSignature:
    """What registration learned from a function's type hints."""

    model: Any  # a pydantic model class over the template parameters, or None without parameters
    names: tuple[str, ...]
    choices: dict[str, dict[str, Any]]  # parameter -> {text as typed in a URI: value}
    descriptions: dict[str, str]
    parameters_schema: dict[str, Any] | None
    returns: Any  # the return annotation when it is structured, else None

    def completions(self, argument: str) -> list[str] | None:
        """Canonical texts of a Literal/Enum/bool parameter (enum values; names are accepted too)."""
        values = self.choices.get(argument)
        if values is None:
            return None
        return [k for k, v in values.items() if not isinstance(v, enum.Enum) or k == _text(v)]

    def validate(self, args: dict[str, str], fn_name: str) -> dict[str, Any]:
        """Template arguments -> keyword arguments; InvalidResourceParams naming the parameter."""
        if self.model is None:
            return dict(args)
        import pydantic

        raw: dict[str, Any] = {}
        for name, text in args.items():
            choices = self.choices.get(name)
            raw[name] = choices.get(text, text) if choices else text
        try:
            validated = self.model.model_validate(raw)
        except pydantic.ValidationError as exc:
            raise InvalidResourceParams(format_validation_error(exc, fn_name)) from None
        # fields are p0, p1, ... aliased to the parameter names (a parameter may be called "schema")
        return {self.names[int(field[1:])]: getattr(validated, field) for field in validated.model_fields_set}


def format_validation_error(exc: Any, fn_name: str) -> str:
    """pydantic's messages, one per parameter: ``year: Input should be greater than or equal to 2000``."""
    parts = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(p) for p in err.get("loc", ())) or "arguments"
        message = err.get("msg", "invalid")
        if "input" in err and err.get("type") != "missing":
            message += f" (got {err['input']!r})"
        parts.append(f"{where}: {message}")
    count = len(parts)
    return f"{count} validation error{'s' if count != 1 else ''} for {fn_name}(): " + "; ".join(parts)


def wants_typing(fn: Callable[..., Any], variables: tuple[str, ...]) -> bool:
    """True when a template parameter has a non-``str`` annotation or the return type is structured.

    Looks at raw ``__annotations__`` only (no import, no evaluation) for the parameters; a string
    annotation of the return type is resolved, which imports nothing new.
    """
    raw = getattr(fn, "__annotations__", None) or {}
    if any(raw.get(v, inspect.Parameter.empty) not in _PLAIN for v in variables):
        return True
    if "return" in raw and raw["return"] not in (None, "None", str, bytes, dict, list, "str", "bytes", "dict", "list"):
        hints = _hints(fn)
        return structured.is_structured_type(hints.get("return"))
    return False


def _hints(fn: Callable[..., Any]) -> dict[str, Any]:
    try:
        return typing.get_type_hints(fn, include_extras=True)
    except Exception:  # one unresolvable name: resolve the others one by one, drop that one
        pass
    out: dict[str, Any] = {}
    namespace = getattr(fn, "__globals__", {})
    for key, value in (getattr(fn, "__annotations__", None) or {}).items():
        if isinstance(value, str):
            try:
                value = eval(value, namespace)  # what get_type_hints does, per annotation
            except Exception:
                continue
        out[key] = value
    return out


def build(fn: Callable[..., Any], variables: tuple[str, ...]) -> TypedSignature:
    """Inspect ``fn`` once: a pydantic model over its template parameters, choices, descriptions."""
    import pydantic

    hints = _hints(fn)
    params = inspect.signature(fn).parameters
    doc_params = parse_param_docs(inspect.getdoc(fn) or "")
    fields: dict[str, Any] = {}
    choices: dict[str, dict[str, Any]] = {}
    names = tuple(v for v in variables if v in params or any(p.kind is p.VAR_KEYWORD for p in params.values()))
    for name in names:
        param = params.get(name)
        annotation = hints.get(name, Any)
        default = param.default if param is not None and param.default is not inspect.Parameter.empty else ...
        annotation = annotation if _pydantic_knows(annotation) else Any
        fields[f"p{len(fields)}"] = (annotation, pydantic.Field(default, alias=name))
        found = value_choices(annotation)
        if found is not None:
            choices[name] = found
    model = None
    schema = None
    descriptions: dict[str, str] = {}
    if fields:
        model = pydantic.create_model(f"{getattr(fn, '__name__', 'resource')}_parameters", **fields)
        for field, info in model.model_fields.items():
            name = info.alias or field
            text = info.description or doc_params.get(name)
            if text:
                descriptions[name] = text
        try:
            schema = model.model_json_schema()
        except Exception:  # an arbitrary class has no JSON Schema: validation still works
            schema = {"type": "object", "properties": {n: {} for n in names}}
        props = schema.get("properties", {})
        for name, text in descriptions.items():
            props.get(name, {}).setdefault("description", text)
    returns = hints.get("return")
    return TypedSignature(
        model=model,
        names=names,
        choices=choices,
        descriptions=descriptions,
        parameters_schema=schema,
        returns=returns if structured.is_structured_type(returns) else None,
    )


def _pydantic_knows(annotation: Any) -> bool:
    """Whether pydantic validates this annotation natively (an arbitrary class gets the raw string)."""
    import pydantic

    try:
        pydantic.TypeAdapter(annotation)
    except Exception:
        return False
    return True


def _unwrap(annotation: Any) -> list[Any]:
    """The alternatives of an annotation: Annotated stripped, Optional/Union split, None dropped."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    if origin is typing.Union or type(annotation).__name__ == "UnionType":
        out = []
        for arg in typing.get_args(annotation):
            if arg is not type(None):
                out.extend(_unwrap(arg))
        return out
    return [annotation]


def value_choices(annotation: Any) -> dict[str, Any] | None:
    """``{"emea": "emea", ...}`` for Literal/Enum/bool annotations (text in a URI -> value), else None."""
    out: dict[str, Any] = {}
    for alt in _unwrap(annotation):
        if typing.get_origin(alt) is typing.Literal:
            for v in typing.get_args(alt):
                out.setdefault(_text(v), v)
        elif isinstance(alt, type) and issubclass(alt, enum.Enum):
            for member in alt:
                out.setdefault(_text(member.value), member)
            for member in alt:  # names are accepted too, after the values
                out.setdefault(member.name, member)
        elif alt is bool:
            out.setdefault("true", True)
            out.setdefault("false", False)
        else:
            return None
    return out or None


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, enum.Enum):
        return _text(value.value)
    return str(value)


def describe(summary: str | None, typed: TypedSignature) -> str | None:
    """The template description followed by one line per parameter: type, choices, constraints, doc."""
    if not typed.parameters_schema:
        return summary
    props = typed.parameters_schema.get("properties", {})
    required = set(typed.parameters_schema.get("required", ()))
    lines = []
    for name in typed.names:
        prop = props.get(name, {})
        bits = [_schema_type(prop, typed.parameters_schema)]
        shown = typed.completions(name)
        if shown:
            bits = ["one of " + ", ".join(shown)]
        for key, sign in (("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<="), ("exclusiveMaximum", "<")):
            if key in prop:
                bits.append(f"{sign} {prop[key]}")
        for key, label in (("minLength", "min length"), ("maxLength", "max length"), ("pattern", "pattern")):
            if key in prop:
                bits.append(f"{label} {prop[key]}")
        if name not in required and "default" in prop:
            bits.append(f"default {json.dumps(prop['default'], default=str)}")
        line = f"- {name} ({', '.join(b for b in bits if b)})"
        if name in typed.descriptions:
            line += f": {typed.descriptions[name]}"
        lines.append(line)
    head = summary or ""
    return (head + "\n\n" if head else "") + "Parameters:\n" + "\n".join(lines)


def _schema_type(prop: dict[str, Any], root: dict[str, Any]) -> str:
    if "$ref" in prop:
        return prop["$ref"].rsplit("/", 1)[-1]
    if "anyOf" in prop:
        return " | ".join(_schema_type(p, root) for p in prop["anyOf"])
    kind = prop.get("type", "")
    fmt = prop.get("format")
    return f"{kind} ({fmt})" if fmt else kind


def parse_param_docs(doc: str) -> dict[str, str]:
    """Parameter descriptions from a docstring: Google ``Args:``, numpydoc ``Parameters`` or ``:param x:``."""
    out: dict[str, str] = {}
    lines = doc.splitlines()
    for line in lines:
        m = _SPHINX_ITEM.match(line)
        if m:
            out[m.group(1)] = m.group(2).strip()
    i = 0
    while i < len(lines):
        if not _SECTION.match(lines[i]):
            i += 1
            continue
        i += 1
        if i < len(lines) and set(lines[i].strip()) == {"-"}:  # numpydoc underline
            i += 1
            i = _numpy_items(lines, i, out)
        else:
            i = _google_items(lines, i, out)
    return out


def _google_items(lines: list[str], i: int, out: dict[str, str]) -> int:
    base: int | None = None
    current: str | None = None
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        indent = len(line) - len(line.lstrip())
        if base is None:
            base = indent
        if indent < base or (indent == 0 and _SECTION.match(line)):
            break
        m = _GOOGLE_ITEM.match(line)
        if indent == base and m:
            current = m.group(2)
            out[current] = m.group(4).strip()
        elif current is not None and indent > base:
            out[current] = (out[current] + " " + line.strip()).strip()
        else:
            break
        i += 1
    return i


def _numpy_items(lines: list[str], i: int, out: dict[str, str]) -> int:
    current: str | None = None
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        indent = len(line) - len(line.lstrip())
        if indent == 0:
            if i + 1 < len(lines) and set(lines[i + 1].strip()) == {"-"}:
                break  # the next section
            m = _NUMPY_ITEM.match(line)
            if not m:
                break
            current = m.group(2)
            out.setdefault(current, "")
        elif current is not None:
            out[current] = (out[current] + " " + line.strip()).strip()
        i += 1
    return i
