"""DM-compatible task and source configuration (YAML), validated with errors that name the
file and the key.

Every key DM accepts either acts, or is refused with what to do instead when ignoring it would
change the data, or (no effect on data) is accepted with a warning: the list is
``coordinator/dm_keys.py``.  Keys DM would reject are errors, as DM itself decodes strictly.
Wrong types are errors.  Passwords may come from ``password`` (plain, or as ``dmctl encrypt``
wrote it: ``coordinator/dm_encrypt.py``), ``password-file`` or ``password-env`` and are never
part of ``repr`` or logs.
"""
from __future__ import annotations

import difflib
import hashlib
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlglot
import yaml

from coordinator import dm_encrypt, dm_keys
from coordinator.checking_items import DM_ITEMS, NOT_HERE, suggest
from coordinator.binlog_filter import EventRule, parse_rule
from coordinator.expr_filter import ExprRule
from coordinator.expr_filter import parse_rule as parse_expr_rule
from coordinator.config_file import read_config
from coordinator.errors import ConfigError, ConfigErrors


# ------------------------------------------------------------------ reading helpers
class _Node:
    """A mapping being validated: remembers its key path so errors can name it.  ``errors``, when
    given, is shared by the whole file: ``fail`` and ``gather`` collect into it, so one answer
    lists every error of the file (a typo and the required key it hides, three refused keys)."""

    def __init__(self, data: Any, path: str, file: str, warnings: list[str],
                 errors: list[ConfigError] | None = None):
        self.file, self.path, self.warnings, self.errors = file, path, warnings, errors
        if not isinstance(data, dict):
            raise ConfigError(f"`{path or '(top level)'}` must be a mapping, got {_tname(data)}",
                              file=file, key=path or "(top level)")
        self.data = data
        self.used: set[str] = set()

    def sub(self, data: Any, path: str) -> "_Node":
        """A node for ``data`` (an item of a list) sharing this file's warnings and errors."""
        return _Node(data, path, self.file, self.warnings, self.errors)

    def fail(self, e: ConfigError) -> None:
        """Record ``e`` and go on when collecting; raise it otherwise."""
        if self.errors is None:
            raise e
        self.errors.extend(e.errors if isinstance(e, ConfigErrors) else [e])

    def gather(self, fn, default=None):
        """``fn()``; on a ConfigError, record it (``fail``) and return ``default``: the parts of a
        file that do not depend on each other are all checked."""
        try:
            return fn()
        except ConfigError as e:
            self.fail(e)
            return default

    def key(self, k: str) -> str:
        return f"{self.path}.{k}" if self.path else k

    def get(self, k: str, typ, default=None, required=False):
        self.used.add(k)
        if k not in self.data or self.data[k] is None:
            if required:
                raise ConfigError(f"`{self.key(k)}` is required", file=self.file, key=self.key(k))
            return default
        v = self.data[k]
        if typ is float and isinstance(v, int) and not isinstance(v, bool):
            v = float(v)
        ok = isinstance(v, typ) and not (typ is int and isinstance(v, bool))
        if not ok:
            want = typ.__name__ if isinstance(typ, type) else "/".join(t.__name__ for t in typ)
            raise ConfigError(f"`{self.key(k)}` must be {_TYPE_WORDS.get(want, want)}, got {_tname(v)} {v!r}",
                              file=self.file, key=self.key(k))
        return v

    def child(self, k: str, required=False) -> "_Node | None":
        v = self.get(k, dict, required=required)
        return None if v is None else self.sub(v, self.key(k))

    def str_list(self, k: str) -> list[str]:
        v = self.get(k, list, default=[])
        for i, item in enumerate(v):
            if not isinstance(item, str):
                raise ConfigError(f"`{self.key(k)}[{i}]` must be a string, got {_tname(item)}",
                                  file=self.file, key=f"{self.key(k)}[{i}]")
        return list(v)

    def finish(self, dm_keys_policy: dict | None = None) -> None:
        """DM keys shardmerge does not use are handled by their policy (``coordinator.dm_keys``:
        warn or refuse); any other unused key is an error."""
        if dm_keys_policy:
            dm_keys.apply(self, dm_keys_policy)
        for k in self.data:
            if k not in self.used:
                hint = _HINTS.get(k) or _did_you_mean(str(k), self.used | set(dm_keys_policy or ()))
                self.fail(ConfigError(f"unknown key `{self.key(k)}`{hint}", file=self.file, key=self.key(k)))


def _did_you_mean(k: str, known: set[str]) -> str:
    """The hint for a near miss of a key this section knows: ' (did you mean `target-database`?)'."""
    close = difflib.get_close_matches(k, sorted(known), n=1, cutoff=0.75)
    return f" (did you mean `{close[0]}`?)" if close else ""


_HINTS = {"continuous-validator-config-name": " (DM's key is `validator-config-name`)",
          "continuous-validator": " (DM's key is `validator-config-name`)"}
_TYPE_WORDS = {"str": "a string", "int": "an integer", "bool": "true or false",
               "list": "a list", "dict": "a mapping", "float": "a number"}


def _tname(v) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean",
            int: "an integer", float: "a number", type(None): "nothing"}.get(type(v), type(v).__name__)


class _StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader, except that a key given twice in one mapping is noted as an error
    (``duplicates``): silently keeping the last one hides a pasted block that overrides an
    earlier setting.  The document still loads (last one kept), so the file's other errors are
    reported in the same answer."""

    def __init__(self, stream):
        super().__init__(stream)
        self.duplicates: list[tuple[object, int, int]] = []

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=deep)
                line = key_node.start_mark.line + 1
                try:
                    if key in seen:
                        self.duplicates.append((key, seen[key], line))
                    seen[key] = line
                except TypeError:       # an unhashable key: the base class reports it
                    pass
        return super().construct_mapping(node, deep=deep)


_StrictLoader.add_constructor("tag:yaml.org,2002:map", _StrictLoader.construct_yaml_map)


def _load_yaml(text: str, file: str, errors: list[ConfigError]) -> Any:
    """The document in ``text``; each key given twice is appended to ``errors`` (with both lines)."""
    loader = _StrictLoader(text)
    try:
        data = loader.get_single_data()
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(f"not valid YAML{where}: {getattr(e, 'problem', e)}", file=file) from None
    finally:
        loader.dispose()
    for key, first, again in loader.duplicates:
        errors.append(ConfigError(f"key `{key}` is given twice (lines {first} and {again}); YAML would keep only "
                                  "the last one: remove the one you do not mean", file=file, key=str(key)))
    return data


# ------------------------------------------------------------------ database endpoint
@dataclass(frozen=True)
class DBConfig:
    """A MySQL endpoint.  A password given as ``password-file`` / ``password-env`` is read
    when a connection is made, in the environment of the process that connects (a worker pod
    has the secret, the master that validated the task need not)."""
    host: str
    port: int
    user: str
    password: str = field(default="", repr=False)
    password_file: str = ""
    password_env: str = ""
    ssl_ca: str = ""
    ssl_cert: str = ""
    ssl_key: str = ""
    # DM's ssl-ca-bytes / ssl-cert-bytes / ssl-key-bytes: PEM content instead of a path (e.g. from
    # a Kubernetes secret); written to a private file when connecting (see ``pymysql_kwargs``)
    ssl_ca_bytes: str = field(default="", repr=False)
    ssl_cert_bytes: str = field(default="", repr=False)
    ssl_key_bytes: str = field(default="", repr=False)
    file: str = field(default="", compare=False)
    key: str = field(default="", compare=False)

    def resolved_password(self) -> str:
        if self.password and dm_encrypt.looks_encrypted(self.password):
            try:
                return dm_encrypt.decrypt(self.password)
            except dm_encrypt.DecryptError as e:
                raise ConfigError(f"`{self.key}.password` {e}", file=self.file, key=f"{self.key}.password") from None
        if self.password_file:
            try:
                return Path(self.password_file).read_text().rstrip("\r\n")
            except OSError as e:
                raise ConfigError(f"cannot read password file {self.password_file!r}: {e.strerror}",
                                  file=self.file, key=f"{self.key}.password-file") from None
        if self.password_env:
            if self.password_env not in os.environ:
                raise ConfigError(f"environment variable {self.password_env!r} (from `password-env`) "
                                  f"is not set in this process", file=self.file, key=f"{self.key}.password-env")
            return os.environ[self.password_env]
        return self.password

    def pymysql_kwargs(self) -> dict:
        """Connection arguments.  With any ``security`` key the connection must be TLS (PyMySQL
        refuses a server that does not offer it: no fallback to plain text) and the server's
        certificate is verified against ``ssl-ca``."""
        kw = {"host": self.host, "port": self.port, "user": self.user, "password": self.resolved_password()}
        paths = {"ca": self.ssl_ca or _pem_file(self.ssl_ca_bytes), "cert": self.ssl_cert or _pem_file(self.ssl_cert_bytes),
                 "key": self.ssl_key or _pem_file(self.ssl_key_bytes)}
        if paths["ca"] or paths["cert"]:
            kw["ssl"] = {k: v for k, v in paths.items() if v}
        return kw

    def tls_hint(self, e: BaseException) -> str:
        """For a connection error: what to check when TLS failed (else "")."""
        text = str(e)
        if not any(w in text for w in ("SSL", "TLS", "certificate", "CERTIFICATE")):
            return ""
        where = f"`{self.key}.security`" + (f" in {self.file}" if self.file else "")
        if not self.tls:
            return f"; TLS to {self.address()} failed although {where} is not set"
        return (f"; TLS to {self.address()} failed: check {where} (ssl-ca must be the CA that signed the "
                f"server's certificate; the server must have TLS enabled)")

    @property
    def tls(self) -> bool:
        return bool(self.ssl_ca or self.ssl_cert or self.ssl_ca_bytes or self.ssl_cert_bytes)

    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def to_json(self) -> dict:
        """For storing in etcd: indirect passwords stay indirect."""
        out = {"host": self.host, "port": self.port, "user": self.user}
        for k, v in (("password", self.password), ("password-file", self.password_file),
                     ("password-env", self.password_env)):
            if v:
                out[k] = v
        sec = {k: v for k, v in (("ssl-ca", self.ssl_ca), ("ssl-cert", self.ssl_cert), ("ssl-key", self.ssl_key),
                                 ("ssl-ca-bytes", self.ssl_ca_bytes), ("ssl-cert-bytes", self.ssl_cert_bytes),
                                 ("ssl-key-bytes", self.ssl_key_bytes)) if v}
        if sec:
            out["security"] = sec
        return out


def _db(node: _Node) -> DBConfig:
    host = node.get("host", str, required=True)
    port = node.get("port", int, default=3306)
    if not 0 < port < 65536:
        raise ConfigError(f"`{node.key('port')}` must be a TCP port (1-65535), got {port}",
                          file=node.file, key=node.key("port"))
    user = node.get("user", str, default="root")
    password = node.get("password", (str, int), default="")
    pfile = node.get("password-file", str, default="")
    penv = node.get("password-env", str, default="")
    if sum(bool(x) for x in (password, pfile, penv)) > 1:
        raise ConfigError(f"give only one of `password`, `password-file`, `password-env` under `{node.path}`",
                          file=node.file, key=node.path)
    sec = node.child("security")
    ssl = {}
    if sec:
        ssl = {k: sec.get(k, str, default="") for k in _SSL_CONFIG_KEYS}
        for k in ("ssl-ca", "ssl-cert", "ssl-key"):
            if ssl[k] and ssl[k + "-bytes"]:
                raise ConfigError(f"give only one of `{k}` and `{k}-bytes` under `{sec.path}`",
                                  file=node.file, key=sec.key(k))
            if ssl[k + "-bytes"] and "-----BEGIN" not in ssl[k + "-bytes"]:
                raise ConfigError(f"`{sec.key(k + '-bytes')}` must be PEM text (-----BEGIN ...); for a file "
                                  f"path use `{k}`", file=node.file, key=sec.key(k + "-bytes"))
        if (ssl["ssl-cert"] or ssl["ssl-cert-bytes"]) != "" and not (ssl["ssl-key"] or ssl["ssl-key-bytes"]):
            raise ConfigError(f"`{sec.key('ssl-cert')}` needs `ssl-key` (the client certificate's private key)",
                              file=node.file, key=sec.key("ssl-key"))
        sec.finish(dm_keys.SECURITY)
    node.finish(dm_keys.DB)
    db = DBConfig(host, port, user, str(password), pfile, penv, *(ssl.get(k, "") for k in _SSL_CONFIG_KEYS),
                  file=node.file, key=node.path)
    if db.password:
        db.resolved_password()      # a dmctl-encrypted password must decrypt now, naming file and key
    return db


_SSL_CONFIG_KEYS = ("ssl-ca", "ssl-cert", "ssl-key", "ssl-ca-bytes", "ssl-cert-bytes", "ssl-key-bytes")


def _pem_file(content: str) -> str:
    """A private file (mode 0600, named by the content's hash) holding PEM ``content``, for
    clients that take paths only; "" for no content."""
    if not content:
        return ""
    d = Path(tempfile.gettempdir()) / f"shardmerge-tls-{os.getuid()}"
    d.mkdir(mode=0o700, exist_ok=True)
    p = d / (hashlib.sha256(content.encode()).hexdigest()[:32] + ".pem")
    if not p.exists():
        tmp = p.with_suffix(f".{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(content)
        os.replace(tmp, p)
    return str(p)


# ------------------------------------------------------------------ source config
@dataclass(frozen=True)
class SourceConfig:
    source_id: str
    db: DBConfig
    enable_gtid: bool = True
    flavor: str = ""          # "mysql", "mariadb", or "" (DM's default: detected from the server)
    server_id: int = 0
    warnings: tuple[str, ...] = ()
    filters: tuple[EventRule, ...] = ()     # DM's source-level binlog event filters (every task of the source)

    def to_json(self) -> dict:
        return {"source-id": self.source_id, "enable-gtid": self.enable_gtid, "flavor": self.flavor,
                "server-id": self.server_id, "from": self.db.to_json()}


def parse_source(text: str, file: str = "<source>") -> SourceConfig:
    """The source file ``text``; every error of the file in one ConfigError (ConfigErrors)."""
    warnings: list[str] = []
    errors: list[ConfigError] = []
    root = _Node(_load_yaml(text, file, errors), "", file, warnings, errors)
    g = root.gather
    sid = g(lambda: _source_id(root))
    flavor = g(lambda: _flavor(root), "")
    rules = []
    for i, item in enumerate(g(lambda: root.get("filters", list, default=[]), [])):
        if (r := g(lambda i=i, item=item: parse_rule(f"source-filter-{i}", root.sub(item, f"filters[{i}]")))):
            rules.append(r)
    gtid = g(lambda: root.get("enable-gtid", bool, default=True), True)
    server_id = g(lambda: root.get("server-id", int, default=0), 0)
    db = g(lambda: _db(root.child("from", required=True)))
    root.used.update({"source-id", "flavor", "filters", "enable-gtid", "server-id", "from"})   # as in parse_task
    root.finish(dm_keys.SOURCE)
    _raise_all(errors, file)
    return SourceConfig(source_id=sid, enable_gtid=gtid, flavor=flavor, server_id=server_id, db=db,
                        warnings=tuple(warnings), filters=tuple(rules))


def _source_id(root: _Node) -> str:
    sid = root.get("source-id", str, required=True)
    if not sid.strip():
        raise ConfigError("`source-id` must not be empty", file=root.file, key="source-id")
    return sid


def _flavor(root: _Node) -> str:
    flavor = root.get("flavor", str, default="").strip().lower()    # DM's "": detected from the server
    if flavor not in ("", "mysql", "mariadb"):
        raise ConfigError(f"`flavor` must be mysql, mariadb or empty (detected from the server), got {flavor!r}",
                          file=root.file, key="flavor")
    return flavor


def _raise_all(errors: list[ConfigError], file: str) -> None:
    """Nothing when ``errors`` is empty; the error itself when there is one; all of them (one
    line each, with its key) otherwise."""
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise ConfigErrors(errors, file)


# ------------------------------------------------------------------ task config
@dataclass(frozen=True)
class Extract:
    """DM's ``extract-table`` / ``extract-schema`` / ``extract-source`` of a route: the
    concatenated groups of ``regexp`` matched on the shard's table / schema name or source id
    (``""`` when it does not match) are written to ``column`` of the merged table."""
    kind: str            # "table" | "schema" | "source"
    regexp: str
    column: str


@dataclass(frozen=True)
class RouteRule:
    name: str
    schema_pattern: str
    table_pattern: str
    target_schema: str
    target_table: str
    extract: tuple[Extract, ...] = ()     # in DM's order: table, schema, source


@dataclass(frozen=True)
class TablePattern:
    db_name: str
    tbl_name: str


@dataclass(frozen=True)
class BlockAllowList:
    do_dbs: tuple[str, ...] = ()
    do_tables: tuple[TablePattern, ...] = ()
    ignore_dbs: tuple[str, ...] = ()
    ignore_tables: tuple[TablePattern, ...] = ()


@dataclass(frozen=True)
class BinlogMeta:
    binlog_name: str = ""
    binlog_pos: int = 0
    binlog_gtid: str = ""


@dataclass(frozen=True)
class SyncerConfig:
    worker_count: int = 4
    batch: int = 500
    safe_mode: bool = False
    binlog_reader: str = "process"   # "process": decoder child process; "spark": mysql-binlog source
    apply_mode: str = "stream"       # "stream": one long-lived Spark job per run of batches; "job": one per chunk


BINLOG_READERS = ("process", "spark")
APPLY_MODES = ("stream", "job")

# DM's default names of the online schema change tools' tables (group 1 = the real table):
# pt-online-schema-change `_t_new` / `_t_old`, gh-ost `_t_gho` / `_t_ghc`, `_t_del`
DEFAULT_SHADOW_RULES = (r"^_(.+)_(?:new|gho)$",)
DEFAULT_TRASH_RULES = (r"^_(.+)_(?:ghc|del|old)$",)
ONLINE_DDL_SCHEMES = ("pt", "gh-ost")


@dataclass(frozen=True)
class OnlineDDLRules:
    """Task option ``online-ddl: true``: which upstream table names are an online schema change
    tool's shadow tables (their DDLs are remembered and run at the cut-over RENAME) and trash
    tables (ignored).  Regular expressions, matched case-insensitively; group 1 of a shadow rule
    is the real table's name."""
    shadow: tuple[str, ...] = DEFAULT_SHADOW_RULES
    trash: tuple[str, ...] = DEFAULT_TRASH_RULES


@dataclass(frozen=True)
class Instance:
    source_id: str
    routes: tuple[RouteRule, ...]
    block_allow_list: BlockAllowList | None
    meta: BinlogMeta | None
    syncer: SyncerConfig
    online_ddl: OnlineDDLRules | None = None    # the task's online-ddl option, on every instance
    filters: tuple[EventRule, ...] = ()         # binlog event filters (``filter-rules``), in that order
    expr_filters: tuple[ExprRule, ...] = ()     # expression filters (``expression-filters``)


@dataclass(frozen=True)
class TaskConfig:
    name: str
    task_mode: str
    shard_mode: str
    meta_schema: str
    target: DBConfig
    instances: tuple[Instance, ...]
    strict_optimistic: bool = False
    warnings: tuple[str, ...] = ()
    source_text: str = field(default="", repr=False, compare=False)
    # DM's ``ignore-checking-items``: the precheck names left out (``coordinator.checking_items``)
    ignore_checking_items: tuple[str, ...] = ()

    def instance(self, source_id: str) -> Instance | None:
        return next((i for i in self.instances if i.source_id == source_id), None)

    @property
    def sources(self) -> list[str]:
        return [i.source_id for i in self.instances]


TASK_MODES = ("all", "full", "incremental")


def _extracts(node: _Node) -> tuple[Extract, ...]:
    out: list[Extract] = []
    for kind in ("table", "schema", "source"):
        sub = node.child(f"extract-{kind}")
        if sub is None:
            continue
        rx = sub.get(f"{kind}-regexp", str, required=True)
        col = sub.get("target-column", str, required=True)
        if rx.startswith("~"):
            raise ConfigError(f"`{sub.key(kind + '-regexp')}` is a regular expression already; remove the leading ~ "
                              f"(DM refuses it too)", file=node.file, key=sub.key(f"{kind}-regexp"))
        try:
            re.compile(rx)
        except re.error as e:
            raise ConfigError(f"`{sub.key(kind + '-regexp')}` {rx!r} is not a regular expression: {e}",
                              file=node.file, key=sub.key(f"{kind}-regexp")) from None
        if not col.strip() or col in {e.column for e in out}:
            raise ConfigError(f"`{sub.key('target-column')}` must be a column name not used by another extract of "
                              f"this route", file=node.file, key=sub.key("target-column"))
        sub.finish()
        out.append(Extract(kind, rx, col))
    if out and not node.data.get("table-pattern"):
        raise ConfigError(f"`{node.key('extract-' + out[0].kind)}` needs a `table-pattern`: origin columns are added "
                          f"to a merged table", file=node.file, key=node.key(f"extract-{out[0].kind}"))
    return tuple(out)


def _route(name: str, node: _Node) -> RouteRule:
    r = RouteRule(name, node.get("schema-pattern", str, required=True), node.get("table-pattern", str, default=""),
                  node.get("target-schema", str, required=True), node.get("target-table", str, default=""),
                  _extracts(node))
    if not r.schema_pattern:
        raise ConfigError(f"`{node.key('schema-pattern')}` must not be empty", file=node.file,
                          key=node.key("schema-pattern"))
    node.finish()
    return r


def _tables(node: _Node, k: str) -> tuple[TablePattern, ...]:
    out = []
    for i, item in enumerate(node.get(k, list, default=[])):
        t = node.sub(item, f"{node.key(k)}[{i}]")
        out.append(TablePattern(t.get("db-name", str, required=True), t.get("tbl-name", str, required=True)))
        t.finish()
    return tuple(out)


def _bal(node: _Node) -> BlockAllowList:
    b = BlockAllowList(tuple(node.str_list("do-dbs")), _tables(node, "do-tables"),
                       tuple(node.str_list("ignore-dbs")), _tables(node, "ignore-tables"))
    node.finish()
    return b


def _syncer(node: _Node) -> SyncerConfig:
    s = SyncerConfig(node.get("worker-count", int, default=4), node.get("batch", int, default=500),
                     node.get("safe-mode", bool, default=False),
                     node.get("binlog-reader", str, default="process"),
                     node.get("apply-mode", str, default="stream"))
    if s.binlog_reader not in BINLOG_READERS:
        raise ConfigError(f"`{node.key('binlog-reader')}` must be process or spark, got {s.binlog_reader!r}",
                          file=node.file, key=node.key("binlog-reader"))
    if s.apply_mode not in APPLY_MODES:
        raise ConfigError(f"`{node.key('apply-mode')}` must be stream or job, got {s.apply_mode!r}",
                          file=node.file, key=node.key("apply-mode"))
    for k in ("worker-count", "batch"):
        if getattr(s, k.replace("-", "_")) < 1:
            raise ConfigError(f"`{node.key(k)}` must be at least 1", file=node.file, key=node.key(k))
    node.finish(dm_keys.SYNCER)
    return s


VALIDATOR_MODES = ("none", "fast", "full")


def _validator(node: _Node) -> str:
    """A ``validators`` entry: checked like DM checks it; its mode is returned (nothing runs it)."""
    mode = node.get("mode", str, default="none")
    if mode not in VALIDATOR_MODES:
        raise ConfigError(f"`{node.key('mode')}` must be one of {', '.join(VALIDATOR_MODES)}, got {mode!r}",
                          file=node.file, key=node.key("mode"))
    for k in ("worker-count", "batch-query-size", "max-pending-row-count"):
        node.get(k, int)
    for k in ("validate-interval", "check-interval", "row-error-delay", "meta-flush-interval",
              "max-pending-row-size"):
        node.get(k, str)
    node.finish()
    return mode


def _dumper(node: _Node) -> None:
    """A ``mydumpers`` entry or an instance's ``mydumper``: ``rows`` and ``where`` act (load_options)."""
    node.get("rows", int)
    where = node.get("where", str, default="")
    if where:
        try:
            sqlglot.parse_one(where, read="mysql")
        except sqlglot.errors.ParseError as e:
            raise ConfigError(f"`{node.key('where')}` {where!r} is not an SQL condition: {str(e).splitlines()[0]}",
                              file=node.file, key=node.key("where")) from None
    node.finish(dm_keys.MYDUMPER)


def _loader(node: _Node) -> None:
    """A ``loaders`` entry or an instance's ``loader``: pool-size, on-duplicate(-logical) and
    batch-rows act (load_options)."""
    node.get("pool-size", int)
    node.get("batch-rows", int)
    node.get("on-duplicate", str)
    node.get("on-duplicate-logical", str)
    node.finish(dm_keys.LOADER)


def _named(root: _Node, k: str, build) -> dict:
    node = root.child(k)
    if node is None:
        return {}
    # a definition with errors maps to None: it is known (references to it are not reported
    # again as undefined) and its own errors are collected
    out = {name: node.gather(lambda name=name: build(name, node.child(name, required=True))) for name in node.data}
    node.used.update(node.data)
    return out


def _online_ddl(root: _Node) -> OnlineDDLRules | None:
    """``online-ddl: true`` (or DM's older ``online-ddl-scheme: pt|gh-ost``) with optional
    ``shadow-table-rules`` / ``trash-table-rules``; None when online DDL is off."""
    on = root.get("online-ddl", bool, default=False)
    scheme = root.get("online-ddl-scheme", str, default="")
    if scheme and scheme not in ONLINE_DDL_SCHEMES:
        raise ConfigError(f"`online-ddl-scheme` must be one of {', '.join(ONLINE_DDL_SCHEMES)}, got {scheme!r}; "
                          f"or use `online-ddl: true`, which recognises both tools", file=root.file,
                          key="online-ddl-scheme")
    rules = {}
    for key, default in (("shadow-table-rules", DEFAULT_SHADOW_RULES), ("trash-table-rules", DEFAULT_TRASH_RULES)):
        given = root.str_list(key)
        for i, pat in enumerate(given):
            try:
                groups = re.compile(pat).groups
            except re.error as e:
                raise ConfigError(f"`{key}[{i}]` {pat!r} is not a regular expression: {e}", file=root.file,
                                  key=f"{key}[{i}]") from None
            if key == "shadow-table-rules" and groups < 1:
                raise ConfigError(f"`{key}[{i}]` {pat!r} has no group: group 1 must capture the real table's "
                                  f"name, e.g. \"^_(.+)_(?:new|gho)$\"", file=root.file, key=f"{key}[{i}]")
        rules[key] = tuple(given) or default
    if not (on or scheme):
        if root.data.get("shadow-table-rules") or root.data.get("trash-table-rules"):
            root.warnings.append(f"{root.file}: `shadow-table-rules` / `trash-table-rules` have no effect "
                                 f"without `online-ddl: true`")
        return None
    return OnlineDDLRules(rules["shadow-table-rules"], rules["trash-table-rules"])


def parse_task(text: str, file: str = "<task>") -> TaskConfig:
    """The task file ``text``; every error of the file in one ConfigError (ConfigErrors): the
    sections that do not depend on each other are all checked."""
    warnings: list[str] = []
    errors: list[ConfigError] = []
    root = _Node(_load_yaml(text, file, errors), "", file, warnings, errors)
    g = root.gather
    online = g(lambda: _online_ddl(root))
    name = g(lambda: _task_name(root))
    mode = g(lambda: _choice(root, "task-mode", TASK_MODES, "all"), "all")
    shard = g(lambda: _shard_mode(root), "")
    defs = {k: _named(root, k, build) for k, build in (
        ("routes", _route), ("filters", parse_rule), ("expression-filter", parse_expr_rule),
        ("validators", lambda n, node: _validator(node)), ("mydumpers", lambda n, node: _dumper(node)),
        ("loaders", lambda n, node: _loader(node)), ("block-allow-list", lambda n, node: _bal(node)),
        ("black-white-list", lambda n, node: _bal(node)), ("syncers", lambda n, node: _syncer(node)))}
    instances = []
    seen: set[str] = set()
    for i, item in enumerate(g(lambda: _instance_list(root), [])):
        inst = g(lambda i=i, item=item: _instance(root.sub(item, f"mysql-instances[{i}]"), defs, online, seen))
        if inst is not None:
            instances.append(inst)
    meta_schema = g(lambda: _identifier(root, "meta-schema", "dm_meta", "database"), "dm_meta")
    target = g(lambda: _db(root.child("target-database", required=True)))
    strict = g(lambda: root.get("strict-optimistic-shard-mode", bool, default=False), False)
    ignore = g(lambda: _ignore_checking_items(root, warnings), ())
    # a helper that stopped at an error may not have read all its keys: they are known anyway
    # (only the error is reported, not "unknown key" besides it)
    root.used.update(_TASK_KEYS)
    root.finish(dm_keys.TASK)
    _raise_all(errors, file)
    cfg = TaskConfig(name=name, task_mode=mode, shard_mode=shard, meta_schema=meta_schema, target=target,
                     instances=tuple(instances), strict_optimistic=strict, source_text=text,
                     ignore_checking_items=ignore, warnings=tuple(warnings))
    for inst in cfg.instances:   # full-load options are checked at start-task, not at load time
        g(lambda inst=inst: load_options(cfg, inst.source_id, file))
    _raise_all(errors, file)
    return cfg


_TASK_KEYS = {"name", "task-mode", "shard-mode", "is-sharding", "meta-schema", "target-database", "mysql-instances",
              "online-ddl", "online-ddl-scheme", "shadow-table-rules", "trash-table-rules",
              "strict-optimistic-shard-mode", "ignore-checking-items", "routes", "filters", "expression-filter",
              "validators", "mydumpers", "loaders", "block-allow-list", "black-white-list", "syncers"}

# MySQL's identifier limit, and the longest name shardmerge derives from a task's name (its
# checkpoint table in `meta-schema`, sql.checkpoint_table)
_IDENT_MAX = 64
_TASK_NAME_MAX = _IDENT_MAX - len("_syncer_checkpoint")


def _task_name(root: _Node) -> str:
    name = root.get("name", str, required=True)
    if not name.strip() or "/" in name:
        raise ConfigError(f"`name` must be a non-empty name without '/', got {name!r}", file=root.file, key="name")
    if len(name) > _TASK_NAME_MAX:
        raise ConfigError(f"`name` is {len(name)} characters; at most {_TASK_NAME_MAX} fit in the name of the task's "
                          f"checkpoint table `{name[:12]}..._syncer_checkpoint` (MySQL names are at most "
                          f"{_IDENT_MAX}): choose a shorter name", file=root.file, key="name")
    _check_ident_chars(root, "name", name)
    return name


def _identifier(root: _Node, k: str, default: str, what: str) -> str:
    """A name shardmerge creates downstream as is (a database, a table): within MySQL's limits."""
    v = root.get(k, str, default=default)
    if not v.strip():
        raise ConfigError(f"`{root.key(k)}` must not be empty", file=root.file, key=root.key(k))
    if len(v) > _IDENT_MAX:
        raise ConfigError(f"`{root.key(k)}` is {len(v)} characters; a MySQL {what} name is at most {_IDENT_MAX}",
                          file=root.file, key=root.key(k))
    _check_ident_chars(root, k, v)
    return v


def _check_ident_chars(node: _Node, k: str, v: str) -> None:
    bad = sorted({c for c in v if ord(c) < 32 or ord(c) == 127})
    if bad or v != v.rstrip(" "):
        what = "control characters (" + ", ".join(f"U+{ord(c):04X}" for c in bad) + ")" if bad else "trailing spaces"
        raise ConfigError(f"`{node.key(k)}` {v!r} has {what}, which MySQL names cannot have",
                          file=node.file, key=node.key(k))


def _choice(root: _Node, k: str, allowed: tuple[str, ...], default: str) -> str:
    v = root.get(k, str, default=default)
    if v not in allowed:
        raise ConfigError(f"`{k}` must be one of {', '.join(allowed)}, got {v!r}", file=root.file, key=k)
    return v


def _shard_mode(root: _Node) -> str:
    shard = root.get("shard-mode", str, default="")
    if shard not in ("", "optimistic"):
        raise ConfigError(f"`shard-mode` {shard!r} is not supported: shardmerge coordinates shard DDLs "
                          f"optimistically; use `shard-mode: optimistic` (or leave it empty for no "
                          f"sharding)", file=root.file, key="shard-mode")
    if root.get("is-sharding", bool, default=False) and not shard:
        raise ConfigError("`is-sharding: true` without `shard-mode` is DM's pessimistic shard mode (every shard "
                          "waits for the others at each DDL), which shardmerge does not implement: it "
                          "coordinates shard DDLs optimistically; add `shard-mode: optimistic` (the shards' "
                          "schemas are joined; see docs/coming-from-dm.md) or remove `is-sharding`",
                          file=root.file, key="is-sharding")
    return shard


def _instance_list(root: _Node) -> list:
    raw = root.get("mysql-instances", list, required=True)
    if not raw:
        raise ConfigError("`mysql-instances` must list at least one source", file=root.file, key="mysql-instances")
    return raw


def _ref(n: _Node, key: str, name: str, table: dict, what: str, where: str):
    """The definition ``name`` refers to (None when it is missing -- recorded -- or has errors of
    its own, recorded where it is defined)."""
    if name not in table:
        n.fail(ConfigError(f"{what} {name!r} is not defined {where}{_did_you_mean(name, set(table))}",
                           file=n.file, key=key))
        return None
    return table[name]


def _instance(n: _Node, defs: dict[str, dict], online: OnlineDDLRules | None, seen: set[str]) -> Instance:
    """One ``mysql-instances`` entry; references to undefined sections are recorded and skipped,
    so the rest of the entry is still checked."""
    file = n.file
    sid = n.get("source-id", str, required=True)
    if sid in seen:
        n.fail(ConfigError(f"source `{sid}` is listed twice", file=file, key=n.key("source-id")))
    seen.add(sid)
    rr = [r for j, rname in enumerate(n.str_list("route-rules"))
          if (r := _ref(n, f"{n.key('route-rules')}[{j}]", rname, defs["routes"], "route rule", "under `routes`"))]
    bal = None
    bals, legacy = defs["block-allow-list"], defs["black-white-list"]
    for key in ("block-allow-list", "black-white-list"):
        ref = n.get(key, str)
        if ref is not None:
            bal = _ref(n, n.key(key), ref, {**legacy, **bals}, key, "at the top level") or bal
    meta = None
    if (m := n.child("meta")) is not None:
        meta = BinlogMeta(m.get("binlog-name", str, default=""), m.get("binlog-pos", int, default=0),
                          m.get("binlog-gtid", str, default=""))
        m.finish()
    syncer = SyncerConfig()
    if (sref := n.get("syncer-config-name", str)) is not None:
        syncer = _ref(n, n.key("syncer-config-name"), sref, defs["syncers"], "syncer config", "under `syncers`") \
            or syncer
    if (inline := n.child("syncer")) is not None:
        syncer = n.gather(lambda: _syncer(inline), syncer)
    if (threads := n.get("syncer-thread", int)) is not None:     # DM: alias of worker-count, wins
        if threads < 1:
            n.fail(ConfigError(f"`{n.key('syncer-thread')}` must be at least 1", file=file,
                               key=n.key("syncer-thread")))
        else:
            syncer = SyncerConfig(**{**syncer.__dict__, "worker_count": threads})
    rules = [r for j, fname in enumerate(n.str_list("filter-rules"))
             if (r := _ref(n, f"{n.key('filter-rules')}[{j}]", fname, defs["filters"], "filter rule", "under `filters`"))]
    erules = [r for j, ename in enumerate(n.str_list("expression-filters"))
              if (r := _ref(n, f"{n.key('expression-filters')}[{j}]", ename, defs["expression-filter"],
                            "expression filter", "under `expression-filter`"))]
    if (vref := n.get("validator-config-name", str)) is not None:
        mode = _ref(n, n.key("validator-config-name"), vref, defs["validators"], "validator config", "under `validators`")
        if mode not in (None, "none"):
            n.warnings.append(f"{file}: `{n.key('validator-config-name')}`: shardmerge has no continuous "
                              f"validator (mode {mode!r} is not run); `shardctl check` compares "
                              f"the downstream with the merged upstream")
    if (d := n.child("mydumper")) is not None:
        n.gather(lambda: _dumper(d))
    if (ld := n.child("loader")) is not None:
        n.gather(lambda: _loader(ld))
    n.get("loader-thread", int)                 # DM: alias of the loader's pool-size (load_options)
    n.used.update({"mydumper-config-name", "loader-config-name"})     # resolved by load_options
    n.finish(dm_keys.INSTANCE)
    return Instance(sid, tuple(rr), bal, meta, syncer, online, tuple(rules), tuple(erules))


def _ignore_checking_items(root: _Node, warnings: list[str]) -> tuple[str, ...]:
    """DM's ``ignore-checking-items``: every value must be one DM defines; "did you mean" for a
    typo.  DM items shardmerge has no check for are accepted with a warning."""
    key = root.key("ignore-checking-items")
    out = []
    for i, item in enumerate(root.str_list("ignore-checking-items")):
        if item in NOT_HERE:
            warnings.append(f"{root.file}: `{key}[{i}]` {item!r}: {NOT_HERE[item]}")
        elif item not in DM_ITEMS:
            root.fail(ConfigError(f"`{key}[{i}]` {item!r} is not a checking item DM defines{suggest(item)}; the items "
                                  f"are {', '.join(sorted(DM_ITEMS))}", file=root.file, key=f"{key}[{i}]"))
            continue
        out.append(item)
    return tuple(out)


# ------------------------------------------------------------------ full-load options
# DM keeps them in named top-level sections referenced from each instance:
#     mydumpers: {global: {rows: 50000}}              # rows per chunk
#     loaders:   {global: {on-duplicate-logical: error, pool-size: 8, batch-rows: 1000}}
#     mysql-instances: [{source-id: s1, mydumper-config-name: global, loader-config-name: global}]
# (``mydumper:`` / ``loader:`` inline under an instance work too).  ``on-duplicate-logical``
# (alias ``on-duplicate``) says what a key collision between shards does during the load:
# ``error`` (our default; DM's is ``replace``) stops with the colliding keys, ``replace`` keeps
# the row loaded last, ``ignore`` the row loaded first.
ON_DUPLICATE = ("error", "replace", "ignore")


@dataclass(frozen=True)
class LoadOptions:
    chunk_rows: int = 50_000        # target rows per chunk (``mydumpers.<n>.rows``)
    on_duplicate: str = "error"     # see module docstring
    pool_size: int = 0              # max concurrent chunk tasks; 0 = one Spark task per chunk
    batch_rows: int = 1_000         # rows per multi-row INSERT
    where: str = ""                 # ``mydumpers.<n>.where``: the condition every copied row meets


def _section(root: dict, inst: dict, top: str, ref_key: str, inline_key: str, file: str, path: str) -> dict:
    out: dict = {}
    ref = inst.get(ref_key)
    if ref is not None:
        named = root.get(top) or {}
        if not isinstance(named, dict) or ref not in named:
            raise ConfigError(f"{ref_key} {ref!r} is not defined under `{top}`", file=file,
                              key=f"{path}.{ref_key}")
        out.update(named[ref] or {})
    if isinstance(inst.get(inline_key), dict):
        out.update(inst[inline_key])
    return out


def _int(d: dict, k: str, default: int, file: str, path: str, minimum: int) -> int:
    v = d.get(k, default)
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise ConfigError(f"`{path}.{k}` must be an integer >= {minimum}, got {v!r}", file=file, key=f"{path}.{k}")
    return v


def load_options(task: "TaskConfig", source_id: str, file: str = "<task>") -> "LoadOptions":
    """The full-load options of ``source_id``'s instance (defaults when the YAML has none)."""
    try:
        root = yaml.safe_load(task.source_text or "") or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"task YAML cannot be re-read for loader options: {e}", file=file) from None
    insts = [i for i in (root.get("mysql-instances") or []) if isinstance(i, dict)]
    idx, inst = next(((n, i) for n, i in enumerate(insts) if i.get("source-id") == source_id), (0, {}))
    path = f"mysql-instances[{idx}]"
    dumper = _section(root, inst, "mydumpers", "mydumper-config-name", "mydumper", file, path)
    loader = _section(root, inst, "loaders", "loader-config-name", "loader", file, path)
    dup = loader.get("on-duplicate-logical", loader.get("on-duplicate", "error"))
    if dup not in ON_DUPLICATE:
        raise ConfigError(f"`on-duplicate-logical` must be one of {', '.join(ON_DUPLICATE)}, got {dup!r}; "
                          f"`error` reports colliding keys between shards, `replace`/`ignore` resolve them",
                          file=file, key=f"{path} loader.on-duplicate-logical")
    if inst.get("loader-thread") is not None:        # DM: alias of pool-size, and it wins
        loader = {**loader, "pool-size": inst["loader-thread"]}
    return LoadOptions(chunk_rows=_int(dumper, "rows", LoadOptions.chunk_rows, file, f"{path} mydumper", 1),
                       on_duplicate=dup,
                       pool_size=_int(loader, "pool-size", 0, file, f"{path} loader", 0),
                       batch_rows=_int(loader, "batch-rows", LoadOptions.batch_rows, file, f"{path} loader", 1),
                       where=str(dumper.get("where") or ""))


def with_source_filters(inst: Instance, source: SourceConfig) -> Instance:
    """The instance's binlog event filters with its source's appended, as DM merges them: a
    source rule for the same schema/table patterns as a task rule is dropped (the task's wins)."""
    if not source.filters:
        return inst
    have = {(r.schema_pattern.lower(), r.table_pattern.lower()) for r in inst.filters}
    extra = tuple(r for r in source.filters if (r.schema_pattern.lower(), r.table_pattern.lower()) not in have)
    return Instance(**{**inst.__dict__, "filters": inst.filters + extra})


def load_task(path: str) -> TaskConfig:
    return parse_task(_read(path), path)


def load_source(path: str) -> SourceConfig:
    return parse_source(_read(path), path)


def _read(path: str) -> str:
    return read_config(path)
