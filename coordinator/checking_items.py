"""DM's ``ignore-checking-items``: which of our check items each of DM's names leaves out.

DM names its checks by what they look at (``binlog_format``, ``auto_increment_ID``); our
items carry DM's checker names where DM has the check (``docs/precheck.md``).  ``all`` leaves
every check out, as ``start-task --skip-precheck`` does.

>>> sorted(ignored_names(("binlog_format", "version")))
['mysql_binlog_format', 'mysql_version']
>>> suggest("binlog_formt")
"; did you mean 'binlog_format'?"
"""
from __future__ import annotations

import difflib

# DM's value -> our item names (a name ending in "*" is a prefix: one item per merged target)
DM_ITEMS: dict[str, tuple[str, ...]] = {
    "all": ("*",),
    "dump_privilege": ("source db dump privilege checker",),
    "replication_privilege": ("source db replication privilege checker",),
    "version": ("mysql_version",),
    "server_id": ("mysql_server_id",),
    "binlog_enable": ("mysql_binlog_enable",),
    "binlog_format": ("mysql_binlog_format",),
    "binlog_row_image": ("mysql_binlog_row_image",),
    "table_schema": ("table structure compatibility check",),
    "schema_of_shard_tables": ("optimistic sharding table *",),
    "shard_table_consistency": ("optimistic sharding table *",),
    "auto_increment_ID": ("auto-increment key checking",),
    "shard_auto_increment": ("auto-increment key checking",),
    "meta_position": ("binlog_start_position",),
    "target_privilege": ("meta_schema_writable",),
}

# DM items for checks shardmerge does not have: accepted, with what they mean here
NOT_HERE: dict[str, str] = {
    "online_ddl": "shardmerge has no online-DDL precheck (a pt-osc / gh-ost run is followed by the task's "
                  "`online-ddl` option); nothing to leave out",
    "binlog_db": "shardmerge has no binlog_do_db / binlog_ignore_db check; nothing to leave out",
    "conn_number": "shardmerge opens a handful of connections per source, not DM's per-worker pools; nothing "
                   "to leave out",
    "lightning_fill": "TiDB Lightning's checks: shardmerge loads with INSERTs; nothing to leave out",
}
for _k in ("lightning_empty_region", "lightning_region_distribution", "lightning_disk_space",
           "lightning_noempty_table", "lightning_cdc_pitr", "lightning_mutex_feature"):
    NOT_HERE[_k] = NOT_HERE["lightning_fill"]


def ignored_names(items: tuple[str, ...] | list[str]) -> set[str]:
    """Our item names (or ``name *`` prefixes, or ``*`` for all) the task leaves out."""
    return {n for i in items for n in DM_ITEMS.get(i, ())}


def is_ignored(name: str, ignored: set[str]) -> bool:
    if "*" in ignored or name in ignored:
        return True
    return any(p.endswith("*") and name.startswith(p[:-1]) for p in ignored)


def suggest(item: str) -> str:
    close = difflib.get_close_matches(item, [*DM_ITEMS, *NOT_HERE], n=1)
    return f"; did you mean {close[0]!r}?" if close else ""
