"""Deletes that span several shard-DDL record kinds (Info, Operation, done mark, SourceTables,
dropped columns): a resolved lock, a table leaving its lock, stop-task (DM's ``optimism/lock.go``
and ``optimism/ops.go`` deletes)."""
from typing import TYPE_CHECKING, Iterable

from etcd3 import transactions as T
from etcd3 import utils as eu

from .errors import BadKey
from .info import Info
from .keys import LockKey, TableRef
from .leader import Fence

if TYPE_CHECKING:
    from .store import StoreCore as _Base
else:
    _Base = object



class LockCleanupOps(_Base):
    """Fenced deletes of the master leader."""

    # caller: master leader (master/locks.py, when the lock keeper reports a lock resolved or empty)
    def remove_lock(self, fence: Fence, lock: LockKey, handled_revision: int) -> bool:
        """Delete all Infos, Operations, done marks and dropped-column records of a resolved lock in ONE
        transaction, guarded so that no Info of the lock has a mod revision above
        ``handled_revision`` (the highest Info revision the engine has processed for the lock).
        Returns False (nothing deleted) when a newer Info exists — it will be handled next."""
        ip = self.keys.lock_prefix("info", lock)
        op = self.keys.lock_prefix("operation", lock)
        dp = self.keys.lock_prefix("dropped-column", lock)
        mp = self.keys.lock_prefix("done", lock)

        def rng(p: str) -> bytes:
            return eu.prefix_range_end(eu.to_bytes(p))
        ok, _, _ = self._fenced(fence, f"removing lock {lock.id}",
                                [T.Mod(ip, rng(ip)) < handled_revision + 1],
                                [T.Delete(ip, rng(ip)), T.Delete(op, rng(op)), T.Delete(mp, rng(mp)), T.Delete(dp, rng(dp))])
        return ok

    # caller: master leader (master/locks.py: table dropped or removed by the operator)
    def depart_table(self, fence: Fence, lock: LockKey, table: TableRef, schema: dict | None) -> int:
        """A table left its lock: its Operation and done mark go, and its Info becomes the
        departed one (``Info.departed``, ``before`` = ``schema``) the lock keeps as the table's
        remnant, so a rebuild remembers what the table made downstream.  No schema: as
        :meth:`delete_table`."""
        if schema is None:
            return self.delete_table(fence, lock, table)
        info = Info.of_departed(lock, table, schema)
        ops = [T.Put(self.keys.info(lock.task, lock.down_schema, lock.down_table, *self._t(table)), info.encode()),
               T.Delete(self.keys.operation(lock.task, lock.down_schema, lock.down_table, *self._t(table))),
               T.Delete(self.keys.key("done", lock.task, lock.down_schema, lock.down_table, *self._t(table)))]
        return self._fenced_chunks(fence, f"removing {table} from lock {lock.id}", ops)

    # caller: master leader (depart_table without a schema)
    def delete_table(self, fence: Fence, lock: LockKey, table: TableRef) -> int:
        """A table left its lock (dropped upstream, or removed by the operator): delete its Info,
        Operation and done mark.  Its dropped-column records stay: the lock keeps them until the
        column's drop is complete downstream (``LockState._remove_member``), and deletes them with
        the column's other records then, or with the lock."""
        ops = [T.Delete(self.keys.info(lock.task, lock.down_schema, lock.down_table, *self._t(table))),
               T.Delete(self.keys.operation(lock.task, lock.down_schema, lock.down_table, *self._t(table))),
               T.Delete(self.keys.key("done", lock.task, lock.down_schema, lock.down_table, *self._t(table)))]
        return self._fenced_chunks(fence, f"removing {table} from lock {lock.id}", ops)

    # caller: master leader (master/locks.py at stop-task)
    def delete_task(self, fence: Fence, task: str, sources: Iterable[str] | None = None) -> int:
        """stop-task: delete the shard-DDL metadata (Infos, Operations, done marks, SourceTables,
        dropped columns, remnants) of the task, or only of ``sources``.  Whole task: one transaction of range
        deletes.  Some sources: per-key deletes in chunks (idempotent; re-run on failure).
        Task config, status and bindings are separate records (``delete_task_config``)."""
        if sources is None:
            ops = []
            for kind in ("info", "operation", "done", "source-tables", "dropped-column", "remnant"):
                p = self.keys.key(kind, task)
                ops.append(T.Delete(p, eu.prefix_range_end(eu.to_bytes(p))))
            _, rev, _ = self._fenced(fence, f"deleting metadata of task {task}", [], ops)
            return rev
        srcs = set(sources)
        ops = [T.Delete(self.keys.key("source-tables", task, s)) for s in srcs]
        for kind in ("info", "operation", "done", "dropped-column", "remnant"):
            resp = self._call("listing", self.client.get_prefix_response, self.keys.key(kind, task), keys_only=True)
            for kv in resp.kvs:
                try:
                    _, parts = self.keys.parse(kv.key)
                except BadKey:
                    continue
                if parts.get("source") in srcs:
                    ops.append(T.Delete(kv.key))
        return self._fenced_chunks(fence, f"deleting metadata of task {task} sources {sorted(srcs)}", ops)
