"""The OpenAPI document the master serves, generated from the code that serves it.

``openapi.json`` holds the written part (summaries, parameters, bodies, schemas) per operation;
``build_spec`` keeps exactly the operations ``app.ROUTES`` serves (plus the spec and the docs
page), refuses a route without its written part or a written operation nobody serves, and adds
what follows from the code: each operation's role (``x-shardmerge-role``, the rule
``access.policy.http_role`` the app enforces), its ``security`` and the 401/403 answers, and the
security schemes.  ``docs.html`` renders the result at ``/api/v1/docs``."""
from __future__ import annotations

import copy
import json
from pathlib import Path

from coordinator.access.policy import http_role

HERE = Path(__file__).resolve().parent
WRITTEN = HERE / "openapi.json"
# served by the app itself, not through ROUTES; public (no credential)
PUBLIC = {("GET", "/api/v1/openapi.json"), ("GET", "/api/v1/docs")}
_ERROR = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorWithMessage"}}}


class SpecError(Exception):
    """The written spec and the served routes disagree."""


def build_spec(routes) -> dict:
    """The served spec for ``routes`` (``{(METHOD, template): handler}``)."""
    written = json.loads(WRITTEN.read_text())
    served = set(routes) | PUBLIC
    documented = {(verb.upper(), path) for path, ops in written["paths"].items() for verb in ops}
    if served - documented:
        raise SpecError(f"served but not written in openapi.json: {sorted(served - documented)}")
    if documented - served:
        raise SpecError(f"written in openapi.json but not served: {sorted(documented - served)}")
    spec = copy.deepcopy(written)
    for path, ops in spec["paths"].items():
        for verb, op in ops.items():
            if (verb.upper(), path) in PUBLIC:
                op["security"] = []
                continue
            role = http_role(verb.upper())
            op["x-shardmerge-role"] = role
            op["security"] = [{}, {"bearerToken": []}, {"clientCertificate": []}]
            op.setdefault("responses", {})
            op["responses"]["401"] = {"description": "no credential, or an unknown token (only when the master "
                                                     "has auth-token-file or ssl-ca)", "content": _ERROR}
            op["responses"]["403"] = {"description": f"needs the {role} role; or a client certificate CN "
                                                     f"not allowed", "content": _ERROR}
    spec.setdefault("components", {})["securitySchemes"] = {
        "bearerToken": {"type": "http", "scheme": "bearer",
                        "description": "a token of the master's auth-token-file (TOKEN,NAME,ROLE lines)"},
        "clientCertificate": {"type": "mutualTLS",
                              "description": "a client certificate signed by the master's ssl-ca; its CN in "
                                             "cert-allowed-cn (operator) or cert-read-only-cn (read)"},
    }
    return spec
