"""One shard-DDL lock as dmctl's JSON shows it (``show-ddl-locks``), from the gRPC answer: the
same document for ``shardctl`` and the HTTP API."""
from __future__ import annotations


def lock_doc(lk) -> dict:
    return {"ID": lk.ID, "task": lk.task, "mode": lk.mode or "optimistic", "owner": lk.owner,
            "DDLs": list(lk.DDLs), "synced": list(lk.synced), "unsynced": list(lk.unsynced),
            "state": lk.state, "error": lk.error,
            "waiting": [{"table": w.table, "waitingFor": w.waiting_for} for w in lk.waiting],
            "owners": [{"owner": o.owner, "DDLs": list(o.DDLs), "state": o.state, "waitingFor": o.waiting_for}
                       for o in lk.owners]}
