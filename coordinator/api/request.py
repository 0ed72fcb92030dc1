"""One HTTP request, checked: path parameters, query parameters and the JSON body are read only
through these helpers, each refusing bad input with an ``ApiError`` that names the input and
says what to send instead (so no handler ever sees a malformed value)."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from urllib.parse import parse_qs, unquote

from coordinator.errors import ShardMergeError


class ApiError(ShardMergeError):
    """A request the API refuses; ``status`` is the HTTP status to answer with."""

    def __init__(self, status: int, message: str, **context):
        super().__init__(message, **context)
        self.status = status


def _text(value: str, what: str) -> str:
    """A string that can travel in a protobuf message: valid UTF-8, no control characters."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ApiError(400, f"{what} is not valid UTF-8 text") from None
    if any(ord(c) < 32 and c not in "\t\n\r" for c in value):
        raise ApiError(400, f"{what} contains control characters; send plain text")
    return value


def _name(value: str, what: str) -> str:
    value = _text(value, what)
    if not value.strip():
        raise ApiError(400, f"{what} is empty")
    if any(c in value for c in "\t\n\r"):
        raise ApiError(400, f"{what} {value!r} contains a line break or tab; names are one line")
    return value


@dataclass
class Request:
    method: str
    route: str                       # the spec path that matched, e.g. /api/v1/tasks/{task-name}
    params: dict[str, str]           # path parameters, still percent-encoded
    query_string: str
    content_type: str
    body: bytes
    _query: dict[str, list[str]] | None = field(default=None, repr=False)

    # ------------------------------------------------------------------ path
    def path(self, name: str) -> str:
        try:
            value = unquote(self.params[name], errors="strict")
        except UnicodeDecodeError:
            raise ApiError(400, f"path parameter {name} is not percent-encoded UTF-8") from None
        return _name(value, f"path parameter {name}")

    # ------------------------------------------------------------------ query
    def query(self, allowed: tuple[str, ...]) -> dict[str, list[str]]:
        if self._query is None:
            try:
                q = parse_qs(self.query_string, keep_blank_values=True, strict_parsing=False, errors="strict")
            except (UnicodeDecodeError, ValueError) as e:
                raise ApiError(400, f"query string of {self.method} {self.route} cannot be read: {e}") from None
            unknown = sorted(set(q) - set(allowed))
            if unknown:
                raise ApiError(400, f"unknown query parameter(s) {', '.join(map(repr, unknown))} for {self.method} "
                               f"{self.route}; " + (f"known: {', '.join(allowed)}" if allowed else "it takes none"))
            self._query = q
        return self._query

    def query_bool(self, name: str, allowed: tuple[str, ...]) -> bool:
        values = self.query(allowed).get(name, [])
        if not values:
            return False
        if len(values) > 1 or values[0] not in ("true", "false"):
            raise ApiError(400, f"query parameter {name} must be true or false once, got {values!r}")
        return values[0] == "true"

    def query_str(self, name: str, allowed: tuple[str, ...]) -> str:
        values = self.query(allowed).get(name, [])
        if len(values) > 1:
            raise ApiError(400, f"query parameter {name} given {len(values)} times; give it once")
        return _text(values[0], f"query parameter {name}") if values else ""

    def query_list(self, name: str, allowed: tuple[str, ...]) -> list[str]:
        """``?name=a&name=b`` (DM's exploded arrays); ``name=a,b`` is also accepted."""
        out: list[str] = []
        for v in self.query(allowed).get(name, []):
            out.extend(_name(x, f"query parameter {name} item") for x in v.split(",") if x != "")
        return out

    # ------------------------------------------------------------------ body
    def json(self, fields: dict[str, str], required: tuple[str, ...] = (), optional_body: bool = False) -> dict:
        """The body as a JSON object with only ``fields`` ({name: kind}); kind is one of
        str, name, bool, int, object, str|object, [name]."""
        where = f"body of {self.method} {self.route}"
        if not self.body.strip():
            if optional_body and not required:
                return {}
            raise ApiError(400, f"{where} is empty; send a JSON object with {', '.join(required or tuple(fields))}")
        ctype = self.content_type.split(";")[0].strip().lower()
        if ctype and ctype != "application/json":
            raise ApiError(415, f"{where} has Content-Type {ctype!r}; send application/json")
        try:
            doc = json.loads(self.body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise ApiError(400, f"{where} is not valid JSON: {e}") from None
        if not isinstance(doc, dict):
            raise ApiError(400, f"{where} must be a JSON object, got {type(doc).__name__}")
        return check_object(doc, fields, required, where)


def check_object(doc: dict, fields: dict[str, str], required: tuple[str, ...], where: str) -> dict:
    unknown = sorted(set(doc) - set(fields))
    if unknown:
        raise ApiError(400, f"unknown field(s) {', '.join(map(repr, unknown))} in {where}; "
                            f"known: {', '.join(fields)}")
    missing = [f for f in required if doc.get(f) in (None, "")]
    if missing:
        raise ApiError(400, f"{where} needs {', '.join(missing)}")
    for k, v in doc.items():
        kind = fields[k]
        what = f"field {k} of {where}"
        if v is None and k not in required:
            continue
        if kind == "bool" and not isinstance(v, bool):
            raise ApiError(400, f"{what} must be true or false, got {json.dumps(v)[:80]}")
        if kind == "int" and (isinstance(v, bool) or not isinstance(v, int)):
            raise ApiError(400, f"{what} must be an integer, got {json.dumps(v)[:80]}")
        if kind in ("str", "name") and not isinstance(v, str):
            raise ApiError(400, f"{what} must be a string, got {json.dumps(v)[:80]}")
        if kind == "str":
            _text(v, what)
        if kind == "name":
            _name(v, what)
        if kind == "object" and not isinstance(v, dict):
            raise ApiError(400, f"{what} must be a JSON object")
        if kind == "str|object":
            if isinstance(v, str):
                _text(v, what)
            elif not isinstance(v, dict):
                raise ApiError(400, f"{what} must be a string (the YAML text) or a JSON object")
        if kind == "[name]":
            if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
                raise ApiError(400, f"{what} must be an array of strings")
            for x in v:
                _name(x, f"item of {what}")
    return doc
