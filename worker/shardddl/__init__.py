"""Optimistic shard-DDL coordination, worker side: one path from a binlog DDL to its checkpoint.

* ``handler``       - the syncer's DDL handler in optimistic mode (split, preview, Info, answer);
* ``decision``      - pure: which path a statement takes, what an Operation means (typed outcomes);
* ``lock_client``   - thin etcd side: put Info, wait for the Operation answering it, mark done;
* ``source_tables`` - this source's SourceTables record (the lock's membership);
* ``errors``        - typed errors with lock ID, source, table, position.

Execution downstream is the syncer's (``worker.sync.ddl_exec``), for every DDL alike.  The life of
one Info is told step by step in docs/ARCHITECTURE.md.
"""
from .decision import TableDDL
from .errors import CoordinationStopped, ShardDDLError, StrictConflict, UnsupportedShardDDL
from .handler import OptimisticDDLHandler, create_if_not_exists, route_statement, routed_ddls
from .lock_client import LockClient
from .source_tables import SourceTablesWriter, list_upstream_tables

__all__ = ["CoordinationStopped", "LockClient", "OptimisticDDLHandler", "ShardDDLError", "SourceTablesWriter",
           "StrictConflict", "TableDDL", "UnsupportedShardDDL", "create_if_not_exists", "list_upstream_tables",
           "route_statement", "routed_ddls"]
