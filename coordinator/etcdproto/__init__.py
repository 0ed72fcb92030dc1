"""The etcd protocol of shardmerge: key layout, versioned JSON records, and the read/write
helpers workers and the master share.  One module per record kind holds the record and its
etcd operations (``info.py``, ``operation.py``, ...); ``store.py`` composes them into ``Store``.
Full reference: docs/etcd-layout.md.

Worker::

    store = Store(connect("127.0.0.1:23790"), prefix="/shardmerge/")
    rev = store.put_info(info)                       # Info -> revision R
    op = store.wait_operation(info.lock, info.table, rev)   # ignores answers to older Infos
    while op.stage is Stage.DETECTED:
        op = store.wait_operation(info.lock, info.table, rev, after_revision=op.revision)
    ... execute op.ddls ...; store.mark_done(op)

Master::

    fence = store.campaign("master-1", addr)          # None if another master leads
    infos = store.list_infos(); ops = store.list_operations(); ...   # rebuild, with .bad
    store.put_operation(fence, op)                    # Fenced if no longer leader
    store.remove_lock(fence, lock_key, handled_revision)
"""
from .errors import (BadKey, EtcdProtoError, EtcdUnavailable, Fenced, GarbageRecord, NotLeader,
                     OperationWaitTimeout, RecordError, StaleOperation, UnknownVersion)
from .keys import DEFAULT_PREFIX, KINDS, Keys, LockKey, TableRef, lock_id, parse_lock_id, parse_table_ref, quote_name
from .binding import SourceBinding
from .binlog_skip import BinlogSkip, binlog_pos_gtid, parse_binlog_pos
from .dropped_column import DroppedColumn
from .info import Info
from .leader import Fence, LeaderRecord
from .operation import DoneMark, Operation, PutResult
from .record import DroppedStage, Listing, Record, Stage
from .remnant import Remnant
from .schema_op import SchemaOp
from .source import SourceRecord
from .source_tables import SourceTables
from .status import SubtaskStatus
from .store import MAX_TXN_OPS, RECORD_TYPES, RecordEvent, Store
from .task import TaskRecord
from .master_member import MasterRegistration
from .worker import WorkerRegistration

__all__ = [
    "BadKey", "EtcdProtoError", "EtcdUnavailable", "Fenced", "GarbageRecord", "NotLeader",
    "OperationWaitTimeout", "RecordError", "StaleOperation", "UnknownVersion",
    "DEFAULT_PREFIX", "KINDS", "Keys", "LockKey", "TableRef", "lock_id", "parse_lock_id", "parse_table_ref", "quote_name",
    "RECORD_TYPES", "DoneMark", "DroppedColumn", "DroppedStage", "Info", "LeaderRecord", "Operation", "Record", "Remnant",
    "SourceBinding", "SourceRecord", "SourceTables", "Stage", "SubtaskStatus", "TaskRecord",
    "WorkerRegistration", "MasterRegistration", "BinlogSkip", "SchemaOp", "binlog_pos_gtid", "parse_binlog_pos", "MAX_TXN_OPS", "Fence", "Listing", "PutResult", "RecordEvent", "Store",
]
