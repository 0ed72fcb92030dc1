"""The access decision itself (coordinator/access/policy.py), without processes: every gRPC
method of master.proto has a role on purpose, identities combine as documented, the token file's
errors name file and line and never the token."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from coordinator.access.policy import (OPERATOR, READ, RPC_ROLES, AccessDenied, AccessPolicy, bearer, http_role,
                                       load_tokens, rpc_role)
from coordinator.errors import ConfigError
from protos import master_pb2 as pb

PROTO = Path(__file__).resolve().parents[2] / "protos" / "master.proto"
TOK_R, TOK_O = "r" * 20, "o" * 20


def test_every_rpc_has_a_role_on_purpose():
    rpcs = set(re.findall(r"^\s*rpc (\w+)\(", PROTO.read_text(), re.M))
    assert rpcs == set(RPC_ROLES), f"give these RPCs a role in RPC_ROLES: {rpcs ^ set(RPC_ROLES)}"


@pytest.mark.parametrize("method, request_, role", [
    ("UnlockDDLLock", pb.UnlockDDLLockRequest(), OPERATOR),
    ("HandleError", pb.HandleErrorRequest(op="skip"), OPERATOR),
    ("HandleError", pb.HandleErrorRequest(op="replace"), OPERATOR),
    ("HandleError", pb.HandleErrorRequest(op="list"), READ),
    ("OperateSource", pb.OperateSourceRequest(op="show"), READ),
    ("OperateSource", pb.OperateSourceRequest(op="create"), OPERATOR),
    ("OperateSource", pb.OperateSourceRequest(op=""), OPERATOR),
    ("OperateSchema", pb.OperateSchemaRequest(op="list"), READ),
    ("OperateSchema", pb.OperateSchemaRequest(op="update"), OPERATOR),
    ("TransferSource", pb.TransferSourceRequest(), OPERATOR),
    ("QueryStatus", pb.QueryStatusRequest(), READ),
    ("CheckTask", pb.CheckTaskRequest(), OPERATOR),
    ("NoSuchMethod", None, OPERATOR),
])
def test_rpc_roles(method, request_, role):
    assert rpc_role(method, request_) == role


def test_http_role():
    assert http_role("GET") == READ
    assert {http_role(m) for m in ("POST", "DELETE", "PUT", "PATCH")} == {OPERATOR}


def test_identities():
    open_ = AccessPolicy()
    assert open_.open and open_.identify(None, None).role == OPERATOR
    certs = AccessPolicy.from_settings("ca.pem", ["ops"], ["viewer"])
    assert certs.identify("ops", None).role == OPERATOR
    assert certs.identify("viewer", None).role == READ
    with pytest.raises(AccessDenied) as e:
        certs.identify("intruder", None)
    assert e.value.status == 403 and "CN 'intruder' is not allowed" in str(e.value)
    with pytest.raises(AccessDenied) as e:
        certs.identify(None, None)
    assert e.value.status == 401 and "client certificate" in str(e.value) and "token" not in str(e.value)
    any_cert = AccessPolicy.from_settings("ca.pem")
    assert any_cert.identify("whoever", None).role == OPERATOR        # DM: any certificate of the CA
    both = AccessPolicy(client_certs=True, read_only_cn=frozenset({"viewer"}),
                        tokens={TOK_R: ("dash", READ), TOK_O: ("alice", OPERATOR)})
    assert both.identify("viewer", TOK_O).name == "token=alice"       # the highest role wins
    assert both.identify("viewer", TOK_R).role == READ
    with pytest.raises(AccessDenied) as e:
        both.identify(None, "x" * 20)
    assert e.value.status == 401 and "unknown token" in str(e.value)
    with pytest.raises(AccessDenied) as e:
        AccessPolicy.authorize(both.identify(None, TOK_R), OPERATOR, "UnlockDDLLock")
    assert e.value.status == 403 and str(e.value) == "UnlockDDLLock needs the operator role; token=dash has the read role"


def test_settings_errors():
    with pytest.raises(ConfigError, match="give ssl-ca"):
        AccessPolicy.from_settings("", ["ops"])
    with pytest.raises(ConfigError, match="in both cert-allowed-cn and cert-read-only-cn"):
        AccessPolicy.from_settings("ca.pem", ["ops"], ["ops"])


@pytest.mark.parametrize("text, words", [
    (f"{TOK_R},dash\n", ["TOKEN,NAME,ROLE", ":1"]),
    (f"# c\n\n{TOK_R},dash,admin\n", ["role 'admin'", ":3"]),
    ("short,dash,read\n", ["shorter than 16", ":1"]),
    (f"{TOK_R},a,read\n{TOK_R},b,operator\n", ["also the token of a", ":2"]),
])
def test_token_file_errors_name_file_and_line_never_the_token(tmp_path, text, words):
    p = tmp_path / "tokens.csv"
    p.write_text(text)
    p.chmod(0o600)
    with pytest.raises(ConfigError) as e:
        load_tokens(str(p))
    msg = str(e.value)
    for w in words:
        assert w in msg, msg
    assert TOK_R not in msg and "short," not in msg


def test_bearer_header():
    assert bearer(None) is None and bearer("Bearer abc") == "abc" and bearer("bearer  abc ") == "abc"
    with pytest.raises(AccessDenied, match="Bearer TOKEN"):
        bearer("Basic b3A6cHc=")


def test_a_token_file_every_user_can_read_is_refused_naming_the_fix(tmp_path):
    p = tmp_path / "tokens.csv"
    p.write_text(f"{'r' * 20},dash,read\n")
    p.chmod(0o644)
    with pytest.raises(ConfigError) as e:
        load_tokens(str(p))
    assert "readable or writable by every user (mode 0644)" in str(e.value) and "chmod o-rwx" in str(e.value)
    p.chmod(0o640)                       # group access is left alone (Kubernetes fsGroup mounts)
    assert load_tokens(str(p))
