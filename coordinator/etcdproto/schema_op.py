"""SchemaOp: an operator's ``binlog-schema list|update|delete`` request, and its etcd operations."""
import dataclasses
import typing
from dataclasses import dataclass
from typing import TYPE_CHECKING

from etcd3 import transactions as T
from etcd3 import utils as eu

from .leader import Fence
from .record import Listing, Record, _meta

if TYPE_CHECKING:
    from .store import StoreCore as _Base
else:
    _Base = object


SCHEMA_OPS = ("list", "update", "delete")
SCHEMA_OP_STATES = ("pending", "done", "failed")


@dataclass
class SchemaOp(Record):
    """An operator's ``shardctl binlog-schema list|update|delete``: a request to the worker bound
    to ``source`` about the tracked schema of upstream table ``up_schema.up_table`` of ``task``.
    Written ``pending`` by the master (``request_id`` tells one request from the next); the
    worker rewrites it ``done`` with ``result`` (list: the tracked ``CREATE TABLE``) or
    ``failed`` with ``result`` = the error.  ``create_sql`` is the new structure (update), or
    ``from_source`` / ``from_target``: the worker reads it from the upstream table / the
    downstream target; ``flush`` writes it to the checkpoint too, ``sync`` sends it to the
    shard-DDL lock."""
    KIND: typing.ClassVar[str] = "schema-op"
    task: str
    source: str
    up_schema: str
    up_table: str
    op: str
    request_id: str
    create_sql: str = ""
    flush: bool = False
    sync: bool = False
    from_source: bool = False
    from_target: bool = False
    state: str = "pending"
    result: str = ""
    worker: str = ""
    requested_at: str = ""
    done_at: str = ""
    revision: int = _meta()

    def validate(self) -> None:
        for n in ("task", "source", "up_schema", "up_table", "request_id"):
            if not getattr(self, n):
                raise ValueError(f"{n} is empty")
        if self.op not in SCHEMA_OPS:
            raise ValueError(f"op is {self.op!r}, expected one of {', '.join(SCHEMA_OPS)}")
        given = [bool(self.create_sql), self.from_source, self.from_target].count(True)
        if given != (1 if self.op == "update" else 0):
            raise ValueError("an update takes exactly one of create_sql, from_source, from_target; "
                             "other ops none")
        if self.state not in SCHEMA_OP_STATES:
            raise ValueError(f"state is {self.state!r}, expected one of {', '.join(SCHEMA_OP_STATES)}")



class SchemaOpOps(_Base):
    """Written by the master leader; answered by the worker bound to the source."""

    # caller: the operations below
    def _schema_op_key(self, rec: SchemaOp) -> str:
        return self.keys.key("schema-op", rec.task, rec.source, rec.up_schema, rec.up_table)

    # caller: master leader (master/schema_ops.py, fenced)
    def put_schema_op(self, fence: Fence, rec: SchemaOp) -> int:
        """Master: write a pending request (replaces an earlier one for the same table)."""
        rec.validate()
        key = self._schema_op_key(rec)
        _, rev, _ = self._fenced(fence, f"writing {key}", [], [T.Put(key, rec.encode())])
        rec.revision = rev
        return rev

    # caller: worker (worker/sync/schema_ops.py)
    def list_schema_ops(self, task: str | None = None, source: str | None = None) -> Listing[SchemaOp]:
        """Requests (all states) of every task, one task, or one task+source."""
        parts = [p for p in (task, source) if p]
        return self._list(SchemaOp, self.keys.key("schema-op", *parts))

    # caller: master leader (master/schema_ops.py, polling the answer)
    def get_schema_op(self, task: str, source: str, up_schema: str, up_table: str) -> SchemaOp | None:
        key = self.keys.key("schema-op", task, source, up_schema, up_table)
        resp = self._call("reading binlog-schema request", self.client.get_response, key)
        return self._decode(SchemaOp, resp.kvs[0].key, resp.kvs[0].value, resp.kvs[0]) if resp.kvs else None

    # caller: worker (worker/sync/schema_ops.py)
    def finish_schema_op(self, rec: SchemaOp, state: str, **fields: typing.Any) -> SchemaOp | None:
        """Worker: store ``rec`` answered (``state`` done/failed, ``result``...), only if the key
        still holds the revision it was read at; None when it changed meanwhile."""
        key = self._schema_op_key(rec)
        new = dataclasses.replace(rec, state=state, **fields)
        new.validate()
        ok, rev, _ = self._txn(f"answering {key}", [T.Mod(key) == rec.revision], [T.Put(key, new.encode())])
        if not ok:
            return None
        new.revision = rev
        return new

    # caller: master leader (master/schema_ops.py, fenced)
    def delete_schema_op(self, fence: Fence, rec: SchemaOp) -> bool:
        """Master: withdraw a request nobody answered (only if unchanged since written)."""
        key = self._schema_op_key(rec)
        ok, _, _ = self._fenced(fence, f"deleting {key}", [T.Mod(key) == rec.revision], [T.Delete(key)])
        return ok

    # caller: master leader (stop-task, fenced)
    def delete_schema_ops(self, fence: Fence, task: str) -> int:
        """stop-task: delete the task's binlog-schema requests."""
        p = self.keys.key("schema-op", task)
        _, rev, _ = self._fenced(fence, f"deleting binlog-schema requests of task {task}", [],
                                 [T.Delete(p, eu.prefix_range_end(eu.to_bytes(p)))])
        return rev
