"""Progress of a full load: a status dict for ``query-status`` and log lines (its text forms, for
the CLI too, are ``coordinator.load_progress``).

Rows loaded come from the finished chunks in the load checkpoint (so any process can compute
them, and a resumed load counts what earlier runs loaded); totals are estimates (the planner's
``TABLE_ROWS`` / index walk), raised to the rows actually loaded when a table is done.
Throughput counts only rows loaded by this run.
"""
from __future__ import annotations

import time

from coordinator.load_progress import bar, format_progress  # noqa: F401 — the text forms live with their readers


class Progress:
    """Builds the progress dict of one source's load from polled checkpoint counts."""

    def __init__(self, source_id: str, tables: dict[tuple[str, str], dict], done_before: dict):
        """``tables``: {(schema, table): {"target": "db.t", "est_rows": n, "chunks": n}};
        ``done_before``: rows/chunks done before this run started (from the checkpoint)."""
        self.source_id = source_id
        self.tables = tables
        self.before = {k: v[0] for k, v in done_before.items()}
        self.started = time.monotonic()
        self.phase = "load"

    def snapshot(self, done: dict[tuple[str, str], tuple[int, int]]) -> dict:
        elapsed = max(1e-6, time.monotonic() - self.started)
        per, loaded, total, cdone, ctotal, run_rows = {}, 0, 0, 0, 0, 0
        for k, info in sorted(self.tables.items()):
            rows, chunks = done.get(k, (0, 0))
            est = max(int(info["est_rows"]), rows)
            if chunks >= info["chunks"]:
                est = rows
            new = max(0, rows - self.before.get(k, 0))
            per[f"{k[0]}.{k[1]}"] = {
                "target": info["target"], "rows_loaded": rows, "rows_total_est": est,
                "chunks_done": chunks, "chunks_total": info["chunks"],
                "percent": round(100.0 * rows / est, 1) if est else (100.0 if chunks >= info["chunks"] else 0.0),
                "rows_per_sec": round(new / elapsed, 1)}
            loaded, total, cdone, ctotal, run_rows = (loaded + rows, total + est, cdone + chunks,
                                                      ctotal + info["chunks"], run_rows + new)
        pct = 100.0 * loaded / total if total else (100.0 if cdone >= ctotal else 0.0)
        if cdone >= ctotal:
            pct = 100.0
        return {"phase": self.phase, "source": self.source_id, "rows_loaded": loaded, "rows_total_est": total,
                "percent": round(pct, 1), "chunks_done": cdone, "chunks_total": ctotal,
                "rows_per_sec": round(run_rows / elapsed, 1), "elapsed_s": round(elapsed, 1),
                "bar": bar(pct), "tables": per}
