"""What shardmerge does with each key DM accepts that it does not use itself.

A key that would change what lands downstream is refused with what to do instead; a key with
no effect on the data is accepted with a warning that says so; a key whose DM default is what
shardmerge does is accepted silently at that value and refused at any other.  Every table
here is keyed by the section it appears in, so an error names the file and the full key.
"""
from __future__ import annotations

from dataclasses import dataclass

from coordinator.errors import ConfigError

WARN, REFUSE, REFUSE_SET, OK = "warn", "refuse", "refuse-set", "ok"


@dataclass(frozen=True)
class Policy:
    """``what``: WARN (accepted, no effect on data), REFUSE (any value), REFUSE_SET (refused when
    true / non-empty / not ``allowed``, else accepted silently), OK (accepted silently)."""
    what: str
    why: str = ""
    allowed: tuple = ()


_NO_DUMP = "shardmerge's full load reads the tables over SQL (Spark tasks); there is no mydumper run"
_PHYSICAL = "TiDB Lightning's physical import only; shardmerge loads with INSERTs"
_HEARTBEAT = "replication lag comes from the binlog events' timestamps (DM deprecated heartbeat too)"

TASK = {
    "enable-heartbeat": Policy(WARN, _HEARTBEAT),
    "heartbeat-update-interval": Policy(WARN, _HEARTBEAT),
    "heartbeat-report-interval": Policy(WARN, _HEARTBEAT),
    "timezone": Policy(REFUSE_SET, "TIMESTAMP values are replicated as instants (UTC sessions on both sides), "
                       "which is what DM does without `timezone` (deprecated in DM); remove the key"),
    "case-sensitive": Policy(REFUSE_SET, "shardmerge matches schema and table names case-insensitively (DM's "
                             "default); remove `case-sensitive: true` and make the patterns tell the tables apart"),
    "collation_compatible": Policy(REFUSE_SET, "shardmerge runs CREATE TABLE as the upstream wrote it (DM's "
                                   "`loose`); remove the key or set it to loose", allowed=("loose",)),
    "clean-dump-file": Policy(WARN, _NO_DUMP),
    "ansi-quotes": Policy(REFUSE_SET, "shardmerge parses statements without ANSI_QUOTES (a \"...\" is a string); "
                          "remove the key if the upstream's sql_mode does not have ANSI_QUOTES"),
    "enable-ansi-quotes": Policy(REFUSE_SET, "shardmerge parses statements without ANSI_QUOTES; remove the key"),
    "remove-meta": Policy(REFUSE_SET, "deprecated in DM too; to start over, stop the task and drop its checkpoint "
                          "tables in `meta-schema` before start-task"),
    "column-mappings": Policy(REFUSE, "DM itself refuses column mapping now (deprecated); shardmerge has no "
                              "column mapping either: remove it and its `column-mapping-rules` (to record each row's shard, "
                              "use a route's `extract-table` / `extract-schema` / `extract-source`)"),
    "experimental": Policy(WARN, "`async-checkpoint-flush`: shardmerge flushes checkpoints after each applied chunk"),
    "tidb": Policy(WARN, "TiDB-only settings"),
    "export-dir": Policy(WARN, _NO_DUMP),
    "import-dir": Policy(WARN, _NO_DUMP),
}

INSTANCE = {
    "column-mapping-rules": Policy(REFUSE, "DM itself refuses column mapping now; remove it"),
    "mydumper-thread": Policy(WARN, _NO_DUMP + " (its parallelism is the chunk tasks')"),
}

SYNCER = {
    "meta-file": Policy(WARN, "positions come from the checkpoints in `meta-schema`"),
    "queue-size": Policy(WARN, "the apply is chunked by rows (`batch`)"),
    "checkpoint-flush-interval": Policy(WARN, "checkpoints are flushed after every applied chunk"),
    "compact": Policy(WARN, "changes are applied one by one in binlog order (same final rows)"),
    "multiple-rows": Policy(WARN, "consecutive changes are always written as multi-row statements"),
    "max-retry": Policy(WARN, "a failed chunk is replayed in safe mode once, then the subtask stops"),
    "auto-fix-gtid": Policy(WARN, "positions are binlog file/pos with the MariaDB GTID state"),
    "enable-gtid": Policy(WARN, "the source's `enable-gtid` decides"),
    "disable-detect": Policy(WARN, "changes of one key always stay in order in one partition"),
    "safe-mode-duration": Policy(WARN, "safe mode is on exactly while a replay is not yet past its end"),
    "enable-ansi-quotes": Policy(REFUSE_SET, "shardmerge parses statements without ANSI_QUOTES; remove the key"),
}

MYDUMPER = {
    "threads": Policy(WARN, _NO_DUMP + " (its parallelism is the chunk tasks')"),
    "chunk-filesize": Policy(WARN, _NO_DUMP + " (`rows` sets the chunk size)"),
    "statement-size": Policy(WARN, _NO_DUMP),
    "skip-tz-utc": Policy(WARN, "TIMESTAMP values are read and written in UTC sessions"),
    "mydumper-path": Policy(WARN, _NO_DUMP),
    "extra-args": Policy(REFUSE_SET, "these are mydumper command-line options and " + _NO_DUMP + "; select tables "
                         "with `block-allow-list` and rows with `where`, then remove `extra-args`"),
}

LOADER = {
    "dir": Policy(WARN, "the full load writes no dump files"),
    "import-mode": Policy(REFUSE_SET, "shardmerge loads with INSERTs (DM's `logical`); remove the key or set "
                          "logical", allowed=("logical", "sql")),
    "sorting-dir-physical": Policy(WARN, _PHYSICAL),
    "on-duplicate-physical": Policy(WARN, _PHYSICAL),
    "disk-quota-physical": Policy(WARN, _PHYSICAL),
    "checksum-physical": Policy(WARN, _PHYSICAL),
    "analyze": Policy(WARN, _PHYSICAL),
    "range-concurrency": Policy(WARN, _PHYSICAL),
    "compress-kv-pairs": Policy(WARN, _PHYSICAL),
    "pd-addr": Policy(WARN, _PHYSICAL),
}

SOURCE = {
    "enable": Policy(WARN, "a source's subtasks run while its task runs (`pause-task -s` stops them)"),
    "auto-fix-gtid": Policy(WARN, "positions are binlog file/pos with the MariaDB GTID state"),
    "meta-dir": Policy(WARN, "shardmerge keeps no relay or meta files on the worker"),
    "enable-relay": Policy(WARN, "workers read the upstream's binlog directly (no relay log)"),
    "relay-binlog-name": Policy(WARN, "no relay log"),
    "relay-binlog-gtid": Policy(WARN, "no relay log"),
    "relay-dir": Policy(WARN, "no relay log"),
    "charset": Policy(WARN, "connections use utf8mb4; values keep the bytes the binlog holds"),
    "purge": Policy(WARN, "no relay log to purge"),
    "checker": Policy(WARN, "a subtask stopped in Error is resumed by `resume-task`"),
    "case-sensitive": Policy(REFUSE_SET, "shardmerge matches schema and table names case-insensitively (DM's "
                             "default); remove `case-sensitive: true`"),
    "tracer": Policy(WARN, "no tracing service"),
    "log-level": Policy(WARN, "set the worker's log level on its command line"),
    "log-file": Policy(WARN, "set the worker's log file on its command line"),
    "log-format": Policy(WARN, "workers log JSON"),
    "log-rotate": Policy(WARN, "workers log to stderr"),
    "validator": Policy(WARN, "no continuous validator; `shardctl check` compares downstream and upstream"),
}

DB = {
    "max-allowed-packet": Policy(WARN, "statements are sized by rows (`batch`)"),
    "session": Policy(REFUSE_SET, "session variables of the downstream connections could change what is written "
                      "(sql_mode, time_zone); set them as the server's defaults and remove `session`"),
}

SECURITY = {"cert-allowed-cn": Policy(WARN, "the server certificate is verified against `ssl-ca`")}


def _set(v) -> bool:
    return v not in (None, False, "", 0, [], {})


def apply(node, table: dict[str, Policy]) -> None:
    """Handle ``node``'s not-yet-used keys found in ``table`` (``node``: ``config._Node``); any
    other unused key is left for ``node.finish()`` to refuse as unknown."""
    for k, v in node.data.items():
        p = table.get(k)
        if p is None or k in node.used:
            continue
        node.used.add(k)
        key = node.key(k)
        if p.what == WARN:
            node.warnings.append(f"{node.file}: `{key}` has no effect in shardmerge ({p.why}); accepted for DM "
                                 f"compatibility")
        elif p.what == REFUSE or (p.what == REFUSE_SET and _set(v) and v not in p.allowed):
            node.fail(ConfigError(f"`{key}` is not supported: {p.why}", file=node.file, key=key))
