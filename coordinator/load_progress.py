"""The text forms of a full load's progress dict (``worker.load.progress.Progress.snapshot``):
a bar for log lines, several lines for ``shardctl query-status --more``.

>>> bar(31.0, 10)
'[###.......]  31.0%'
"""
from __future__ import annotations


def bar(percent: float, width: int = 30) -> str:
    """``[#########.....................]  31.0%`` — for the CLI."""
    p = max(0.0, min(100.0, float(percent)))
    fill = int(round(width * p / 100))
    return f"[{'#' * fill}{'.' * (width - fill)}] {p:5.1f}%"


def format_progress(p: dict) -> str:
    """Multi-line text for ``shardctl query-status`` / a terminal."""
    lines = [f"full load {p.get('source', '')} {p.get('bar') or bar(p.get('percent', 0))} "
             f"{p.get('rows_loaded', 0)}/{p.get('rows_total_est', 0)} rows, "
             f"{p.get('chunks_done', 0)}/{p.get('chunks_total', 0)} chunks, {p.get('rows_per_sec', 0)} rows/s"]
    for name, t in sorted((p.get("tables") or {}).items()):
        lines.append(f"  {name} -> {t['target']}: {bar(t['percent'], 20)} {t['rows_loaded']}/{t['rows_total_est']}")
    return "\n".join(lines)
