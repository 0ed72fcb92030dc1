"""Binlog checkpoints of one (task, source), stored in the downstream — the ONE place their rules live.

Table ``<meta-schema>.<task>_syncer_checkpoint``, unique key ``(id, cp_schema, cp_table)``:
``id`` = source ID; ``cp_schema``/``cp_table`` = upstream table, both empty for the **global
row**; ``binlog_name/pos/gtid`` = the point; ``table_info`` = the table's schema at that point
(JSON text, ``null`` allowed; the master reads it when a table joins a lock); on the global row
``exit_safe_binlog_*`` = the *safe-until* point (below); on a table row ``ddl_intent`` = the
DDL being executed (below); timestamps.

Rules (tested in tests/worker/test_checkpoint.py and the syncer tests):

1. **Meaning.**  A table point P means "every change of this table up to P (the end of the
   transaction or DDL at P) is in the downstream".  The global point G means "the binlog up to
   G is fully handled for every table not held" — the syncer resumes reading at G.
2. **Only acknowledged progress.**  A table point advances only from what the downstream
   acknowledged: the partition transactions that returned, or the DDL that executed
   (tiflow#12626).  The global point advances only after all changes before it are flushed.
3. **Never back.**  Saving an older point than the saved or stored one is refused (logged,
   the newer point kept); flushing re-reads the stored rows under a lock and never lowers them
   (a second, stale process cannot move a point back either).
4. **Global <= pending DDLs.**  While a table is held on a DDL (a shard conflict), the
   global point is clamped to the position before that DDL, so a restart meets it again.
5. **Table rows first, global row last, one transaction.**  A flush is atomic: either the
   whole snapshot is stored or nothing is.
6. **Skip what is applied.**  On resume every change whose position <= its table's point is
   skipped; DDLs at or before a table's point are never executed again.
7. **Safe replay.**  Before the syncer applies a batch it stores the batch's end as
   *safe-until*.  After a crash, every change up to safe-until is applied idempotently (REPLACE
   / ON DUPLICATE KEY UPDATE / DELETE by key) because it may already be downstream; past it the
   syncer writes normally.  So no row is lost (resume <= acknowledged) and none is duplicated.
8. **DDL at most once.**  Before executing a DDL the syncer stores ``ddl_intent`` = {DDL end
   position, the target's ``SHOW CREATE TABLE`` before}.  If a crash hits between execution and
   the checkpoint, the restart sees the intent; when the target's definition no longer equals
   the recorded one the DDL ran, and it is not run a second time.
8b. **A coordinated shard DDL is finished once.**  After its statements ran (or the lock answered
   "nothing to run") and before its done mark, the syncer records ``ddl_intent`` = {DDL end, finished}.
   A restart that meets the DDL again (its checkpoint had not moved past it yet) does not send it to
   the lock again -- the lock may have resolved and been removed meanwhile, and a new one would
   decide it afresh (run it twice, or hold it forever): the handler gives the done mark if the lock
   still waits for it and the tracked schema follows (``handler.resume_finished``).  A shard table's
   CREATE is recorded the same way, with its schema, before SourceTables names the table: a master
   that starts the joining table from its checkpoint reads that schema, not the lock's first one.
   A multi-change ALTER coordinated one change at a time records each change: ``change`` (its
   index) in both records and ``done`` (changes before it, finished) in the execution record, with
   the schema after the finished ones; the table's point passes the statement with its last change
   (docs/lock-algorithm.md, "One change at a time").
9. **Rebuild, don't remember.**  All in-memory state of a restarted syncer (read position,
   table points, schemas, safe mode window) comes from these rows (tiflow#9588).  The one
   exception is the operator's: a ``binlog-schema update|delete --flush=false`` structure, kept by
   the worker until the table's row holds it (``worker.sync.schema_ops``).
10. **Keyless tables move their point with their rows.**  Rule 7 cannot make a table without a
   primary/unique key exact (``REPLACE`` has no key; matching every column may remove a
   legitimately identical row), so the apply transaction of a keyless table's changes also
   moves that table's row here (``worker.sync.apply._save_points``, never back): committed,
   rule 6 skips them on replay; rolled back, they are applied again.  No duplicate, no loss.
11. **Folded statements go with the point.**  When the lock asks a held table to run some of its
   later statements together with the held one (``Operation.combine``), the statement that ran
   records them in its intent row (``combine``); once it is done, the table's row lists them in
   ``folded`` (end position, statement, the renames it makes), written with the point in one
   flush.  Until the point passes a folded statement the table's rows are written through its
   renames, and when the stream reaches it nothing runs (its change is downstream and tracked
   already); the point then passes it and the list loses it in the same flush
   (docs/lock-algorithm.md, "Opposite orders across statements").

Why not one transaction per table for DML + checkpoint: a keyed table's changes are spread over
several Spark tasks by key hash, each committing on its own; rule 7 makes their replay exact.
A keyless table's changes all go to one partition, which is why rule 10 can do it.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

import pymysql
from pymysql.cursors import Cursor

from coordinator.errors import ShardMergeError
from coordinator.obs import logger
from coordinator.sql import checkpoint_table, quote_ident
from worker.events import Position
from worker.meta_store import MetaStore
from worker.sync.fence import FENCE_COLUMN, GLOBAL_ROW, FencedOut, check_fence

log = logger("worker.sync.checkpoint")


class CheckpointError(ShardMergeError):
    """Checkpoints could not be read or written; names task, source and table."""


@dataclass
class TablePoint:
    pos: Position
    table_info: str | None = None            # JSON text or None
    ddl_intent: dict | None = None
    dirty: bool = False
    # later statements of the table a combined DDL already ran (rule 11), in binlog order
    folded: list = field(default_factory=list)


@dataclass
class Loaded:
    global_pos: Position | None
    safe_until: Position | None
    tables: dict[tuple[str, str], TablePoint] = field(default_factory=dict)


table_name = checkpoint_table      # the name the master reads too (coordinator.sql)
_q = quote_ident


class CheckpointStore(MetaStore):
    """In-memory points of one (task, source) plus their flush to the downstream."""

    columns = """
        id VARCHAR(64) NOT NULL,
        cp_schema VARCHAR(128) NOT NULL,
        cp_table VARCHAR(128) NOT NULL,
        binlog_name VARCHAR(128) NOT NULL DEFAULT '',
        binlog_pos BIGINT UNSIGNED NOT NULL DEFAULT 0,
        binlog_gtid TEXT,
        exit_safe_binlog_name VARCHAR(128) NOT NULL DEFAULT '',
        exit_safe_binlog_pos BIGINT UNSIGNED NOT NULL DEFAULT 0,
        exit_safe_binlog_gtid TEXT,
        table_info LONGTEXT,
        ddl_intent LONGTEXT,
        folded LONGTEXT,
        is_global TINYINT(1) NOT NULL DEFAULT 0,
        create_time TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
        update_time TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
        UNIQUE KEY uk_id_schema_table (id, cp_schema, cp_table)
    """
    error = CheckpointError
    what = "checkpoints"

    def __init__(self, db_kwargs: dict, meta_schema: str, task: str, source_id: str, epoch: int = 0):
        """``epoch``: this writer's binding epoch (``worker.sync.fence``); 0 = not fenced."""
        self.epoch = epoch
        super().__init__(db_kwargs, meta_schema, task, source_id, f"{_q(meta_schema)}.{_q(table_name(task))}")
        self.global_pos: Position | None = None
        self.global_dirty = False
        self.safe_until: Position | None = None
        self.tables: dict[tuple[str, str], TablePoint] = {}
        self.holds: dict[tuple[str, str], Position] = {}
        # tables whose row lists folded statements (rule 11): the apply reads only these per chunk
        self.folding: set[tuple[str, str]] = set()
        self.rejected = 0                   # older saves refused (rule 3); exposed for tests/metrics

    # ------------------------------------------------------------------ storage
    # Each method is one ``_transaction``; ``rollback_on`` names the errors a method rolls back
    # explicitly (the server discards any other's transaction when the connection closes).
    def _upgrade(self, cur: Cursor) -> None:
        # tables made by an earlier release get the columns it did not have; looked up first,
        # because MySQL has no ADD COLUMN IF NOT EXISTS (a MySQL downstream)
        for name, definition in ((FENCE_COLUMN, "BIGINT NOT NULL DEFAULT 0"), ("folded", "LONGTEXT")):
            cur.execute("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s "
                        "AND TABLE_NAME = %s AND COLUMN_NAME = %s", (self.meta_schema, table_name(self.task), name))
            if cur.fetchone()[0]:
                continue
            try:
                cur.execute(f"ALTER TABLE {self.fq} ADD COLUMN {name} {definition}")
            except pymysql.err.OperationalError as e:
                if not (e.args and e.args[0] == 1060):    # another source's store added it meanwhile
                    raise

    def claim(self) -> None:
        """Fencing: make this writer's epoch the source's (see ``worker.sync.fence``); raises
        :class:`FencedOut` when a newer writer has claimed it."""
        if not self.epoch:
            return
        with self._transaction(rollback_on=(BaseException,)) as cur:
            cur.execute(f"INSERT IGNORE INTO {self.fq} (id, cp_schema, cp_table, table_info, is_global) "
                        f"VALUES (%s, '', '', 'null', 1)", (self.source_id,))
            cur.execute(f"SELECT {FENCE_COLUMN} FROM {self.fq} WHERE {GLOBAL_ROW} FOR UPDATE", (self.source_id,))
            stored = int(cur.fetchone()[0])
            if stored > self.epoch:
                raise FencedOut(f"source {self.source_id} was claimed by a newer binding (epoch {stored} > "
                                f"{self.epoch}); this worker does not write it", task=self.task,
                                source=self.source_id)
            cur.execute(f"UPDATE {self.fq} SET {FENCE_COLUMN} = %s WHERE {GLOBAL_ROW}", (self.epoch, self.source_id))
        log.info("writer epoch claimed", task=self.task, source=self.source_id, epoch=self.epoch)

    def check_fence(self) -> None:
        """The fence, on its own (before a DDL, which cannot share a transaction)."""
        if not self.epoch:
            return
        with self._transaction() as cur:
            check_fence(cur, self.fq, self.source_id, self.epoch)

    def load(self) -> Loaded:
        """Read every row of this source and make them the in-memory state (rule 9)."""
        try:
            with self._transaction() as cur:
                cur.execute(f"SELECT cp_schema, cp_table, binlog_name, binlog_pos, binlog_gtid, "
                            f"exit_safe_binlog_name, exit_safe_binlog_pos, exit_safe_binlog_gtid, "
                            f"table_info, ddl_intent, folded, is_global FROM {self.fq} WHERE id = %s",
                            (self.source_id,))
                rows = cur.fetchall()
        except pymysql.MySQLError as e:
            raise CheckpointError(f"cannot read checkpoints from {self.fq}: {e}", task=self.task,
                                  source=self.source_id) from e
        self.global_pos, self.safe_until, self.tables, self.holds = None, None, {}, {}
        self.folding = set()
        self.global_dirty = False
        for s, t, bn, bp, bg, sn, sp, sg, info, intent, folded, is_global in rows:
            if is_global:
                self.global_pos = Position(bn, int(bp), bg or "") if bn else None
                self.safe_until = Position(sn, int(sp), sg or "") if sn else None
            else:
                self.tables[(s, t)] = TablePoint(Position(bn, int(bp), bg or ""), info,
                                                 json.loads(intent) if intent else None,
                                                 folded=json.loads(folded) if folded else [])
                if self.tables[(s, t)].folded:
                    self.folding.add((s, t))
        return Loaded(self.global_pos, self.safe_until, dict(self.tables))

    # ------------------------------------------------------------------ in-memory saves
    def table_point(self, schema: str, table: str) -> Position | None:
        tp = self.tables.get((schema, table))
        return tp.pos if tp else None

    def save_table(self, schema: str, table: str, pos: Position, table_info: str | None = None,
                   keep_info: bool = True, folded: list | None = None) -> bool:
        """Advance one table's point (rule 3: an older position is refused); ``folded`` (None:
        kept) replaces the table's folded statements (rule 11), stored with the point."""
        key = (schema, table)
        tp = self.tables.get(key)
        if tp is not None and pos < tp.pos:
            self.rejected += 1
            log.warning("refused to move a table checkpoint back", task=self.task, source=self.source_id,
                        table=f"{schema}.{table}", position=str(pos), current=str(tp.pos))
            return False
        info = table_info if (table_info is not None or not keep_info or tp is None) else tp.table_info
        fold = list(folded) if folded is not None else (tp.folded if tp else [])
        self.tables[key] = TablePoint(pos, info, tp.ddl_intent if tp else None, True, fold)
        if fold:
            self.folding.add(key)
        else:
            self.folding.discard(key)
        return True

    def hold(self, schema: str, table: str, before: Position) -> None:
        """Rule 4: the global point stays at or before ``before`` until released."""
        self.holds[(schema, table)] = before

    def release(self, schema: str, table: str) -> None:
        self.holds.pop((schema, table), None)

    def save_global(self, pos: Position) -> bool:
        if self.holds:
            floor = min(self.holds.values())
            if floor < pos:
                pos = floor
        if self.global_pos is not None and pos < self.global_pos:
            if pos.same_point(self.global_pos):
                return True
            self.rejected += 1
            log.warning("refused to move the global checkpoint back", task=self.task,
                        source=self.source_id, position=str(pos), current=str(self.global_pos))
            return False
        if pos == self.global_pos:
            # unchanged (a statement right after a chunk starts where the chunk ended): the
            # flush that follows has nothing to write for it, one downstream commit fewer a DDL
            return True
        self.global_pos = pos
        self.global_dirty = True
        return True

    # ------------------------------------------------------------------ flushes
    def flush(self) -> None:
        """Rule 5: table rows then the global row, in one transaction, never lowering a row.
        Two sources of one task flushing their first rows at once can deadlock on the unique
        key's gap locks (MariaDB 1213) or time out on a lock wait (1205): the transaction is
        rolled back whole, so it is simply run again."""
        dirty = {k: tp for k, tp in self.tables.items() if tp.dirty}
        if not dirty and not self.global_dirty:
            return
        for attempt in range(1, 6):
            try:
                self._flush_once(dirty)
                break
            except pymysql.MySQLError as e:
                if e.args and e.args[0] in (1213, 1205) and attempt < 5:
                    log.warning("checkpoint flush hit a lock conflict; retrying", task=self.task,
                                source=self.source_id, attempt=attempt, error=str(e))
                    time.sleep(0.05 * attempt)
                    continue
                raise CheckpointError(f"checkpoint flush to {self.fq} failed: {e}", task=self.task,
                                      source=self.source_id, position=str(self.global_pos)) from e
        for tp in dirty.values():
            tp.dirty = False
        self.global_dirty = False

    def _flush_once(self, dirty: dict) -> None:
        with self._transaction(rollback_on=(pymysql.MySQLError, FencedOut)) as cur:
            check_fence(cur, self.fq, self.source_id, self.epoch, lock="FOR UPDATE")
            cur.execute(f"SELECT cp_schema, cp_table, binlog_name, binlog_pos FROM {self.fq} "
                        f"WHERE id = %s FOR UPDATE", (self.source_id,))
            stored = {(s, t): Position(bn, int(bp)) for s, t, bn, bp in cur.fetchall()}
            for (s, t), tp in dirty.items():
                old = stored.get((s, t))
                if old is not None and old.file and tp.pos < old:
                    self.rejected += 1
                    log.warning("stored table checkpoint is newer; keeping it", task=self.task,
                                source=self.source_id, table=f"{s}.{t}", position=str(tp.pos),
                                stored=str(old))
                    continue
                self._upsert(cur, s, t, tp.pos, tp.table_info, 0, tp.folded)
            if self.global_dirty and self.global_pos is not None:
                old = stored.get(("", ""))
                if old is None or not old.file or old <= self.global_pos:
                    self._upsert(cur, "", "", self.global_pos, None, 1)
                else:
                    self.rejected += 1
                    log.warning("stored global checkpoint is newer; keeping it", task=self.task,
                                source=self.source_id, position=str(self.global_pos), stored=str(old))

    def _upsert(self, cur, s, t, pos: Position, info, is_global, folded: list | None = None) -> None:
        cur.execute(f"""INSERT INTO {self.fq} (id, cp_schema, cp_table, binlog_name, binlog_pos,
                        binlog_gtid, table_info, folded, is_global) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s)
                        ON DUPLICATE KEY UPDATE binlog_name = VALUES(binlog_name),
                        binlog_pos = VALUES(binlog_pos), binlog_gtid = VALUES(binlog_gtid),
                        table_info = IF(%s, table_info, VALUES(table_info)),
                        folded = IF(%s, folded, VALUES(folded))""",
                    (self.source_id, s, t, pos.file, pos.pos, pos.gtid,
                     info if info is not None else "null", json.dumps(folded) if folded else None, is_global,
                     int(bool(is_global)), int(bool(is_global))))

    def write_safe_until(self, pos: Position) -> None:
        """Rule 7: store the end of the batch about to be applied (only ever raised)."""
        if self.safe_until is not None and pos <= self.safe_until:
            return
        with self._transaction() as cur:
            check_fence(cur, self.fq, self.source_id, self.epoch)
            g = self.global_pos or Position()
            cur.execute(f"""INSERT INTO {self.fq} (id, cp_schema, cp_table, binlog_name, binlog_pos,
                            binlog_gtid, exit_safe_binlog_name, exit_safe_binlog_pos,
                            exit_safe_binlog_gtid, table_info, is_global)
                            VALUES (%s,'','',%s,%s,%s,%s,%s,%s,'null',1)
                            ON DUPLICATE KEY UPDATE exit_safe_binlog_name = VALUES(exit_safe_binlog_name),
                            exit_safe_binlog_pos = VALUES(exit_safe_binlog_pos),
                            exit_safe_binlog_gtid = VALUES(exit_safe_binlog_gtid)""",
                        (self.source_id, g.file, g.pos, g.gtid, pos.file, pos.pos, pos.gtid))
        self.safe_until = pos

    def write_ddl_intent(self, schema: str, table: str, intent: dict | None) -> None:
        """Rule 8: record (or clear, with None) the DDL being executed for one table."""
        tp = self.tables.get((schema, table))
        pos = tp.pos if tp else Position()
        with self._transaction() as cur:
            check_fence(cur, self.fq, self.source_id, self.epoch)
            cur.execute(f"""INSERT INTO {self.fq} (id, cp_schema, cp_table, binlog_name, binlog_pos,
                            binlog_gtid, table_info, ddl_intent, is_global)
                            VALUES (%s,%s,%s,%s,%s,%s,%s,%s,0)
                            ON DUPLICATE KEY UPDATE ddl_intent = VALUES(ddl_intent)""",
                        (self.source_id, schema, table, pos.file, pos.pos, pos.gtid,
                         (tp.table_info if tp and tp.table_info else "null"),
                         json.dumps(intent) if intent else None))
        if tp is None:
            tp = self.tables[(schema, table)] = TablePoint(pos, None)
        tp.ddl_intent = intent

    def write_table_info(self, schema: str, table: str, table_info: str | None) -> None:
        """``binlog-schema update|delete --flush``: store one table's tracked schema (None: none,
        re-read from the upstream at the next start) without moving its point; a table without a
        row gets one with an empty point (nothing applied is claimed).  Fenced like every write."""
        with self._transaction(rollback_on=(BaseException,)) as cur:
            check_fence(cur, self.fq, self.source_id, self.epoch)
            cur.execute(f"""INSERT INTO {self.fq} (id, cp_schema, cp_table, binlog_name, binlog_pos,
                            binlog_gtid, table_info, is_global) VALUES (%s,%s,%s,'',0,'',%s,0)
                            ON DUPLICATE KEY UPDATE table_info = VALUES(table_info)""",
                        (self.source_id, schema, table, table_info if table_info is not None else "null"))
        tp = self.tables.get((schema, table))
        if tp is not None:
            tp.table_info = table_info

    def tracked_tables(self) -> list[tuple[str, str]]:
        """Tables whose checkpoint row holds a schema: as of that point the table existed (a
        replayed ``DROP TABLE`` saves its row with none), so it stays a lock member until the
        replay meets its drop, even when it is gone upstream by now.  Read only; no rows (the
        table not made yet) is an empty list."""
        try:
            with self._transaction() as cur:
                cur.execute(f"SELECT cp_schema, cp_table FROM {self.fq} WHERE id = %s AND is_global = 0 "
                            f"AND table_info IS NOT NULL AND table_info <> 'null'", (self.source_id,))
                return [(s, t) for s, t in cur.fetchall()]
        except pymysql.MySQLError as e:
            if e.args and e.args[0] in (1049, 1146):      # meta schema / checkpoint table not made yet
                return []
            raise CheckpointError(f"cannot read checkpoints from {self.fq}: {e}", task=self.task,
                                  source=self.source_id) from e

    def delete_all(self) -> None:
        """Remove this source's rows (task removed with --remove-meta)."""
        with self._transaction() as cur:
            cur.execute(f"DELETE FROM {self.fq} WHERE id = %s", (self.source_id,))
