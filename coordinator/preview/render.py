"""The preview report as a table (``shardctl ddl-preview --format table``)."""
from __future__ import annotations


def _cost(c: dict | None) -> str:
    if not c:
        return "-"
    cls = c.get("class", "unknown")
    if cls in ("instant", "no-op"):
        return cls
    touched = c.get("rows_touched")
    return f"{cls} ({touched} rows{'' if c.get('rows_exact') else ' est.'})" if touched is not None else cls


def _step(s: dict) -> list[str]:
    title = f"step {s['step']}" + (f" on {', '.join(s['shards'])}" if s["shards"] else "") + \
        f": {s['statement']}  -> lock {s['lock_state']}" + ("  (RESOLVES here)" if s["resolved"] else "")
    out = [title]
    for d in s["downstream"]:
        out.append(f"    runs downstream [{_cost(d.get('cost'))}] by {d['table']}: {d['statement']}")
    if not s["downstream"]:
        out.append("    runs downstream: nothing")
    for h in s["held"]:
        out.append(f"    held {h['table']}: {h['waitingFor']}")
    for c in s["conflicts"]:
        out.append(f"    CONFLICT {c['table']} ({c['stage']}): {c['message']}")
        out.extend(f"      exit: {e}" for e in c.get("exits", []))
    for p in s["partially_dropped"]:
        out.append(f"    column `{p['column']}` partially dropped: still on {', '.join(p['still_on'])}")
    held = {h["table"] for h in s["held"]} | {c["table"] for c in s["conflicts"]}
    for w in s["waiting"]:
        if w["table"] not in held:
            out.append(f"    waits {w['table']}: {w['waitingFor']}")
    return out


def preview_table(doc: dict) -> str:
    if "preview" not in doc:
        return f"FAILED: {doc.get('msg', '')}"
    p = doc["preview"]
    lines = [f"task {p['task']}, target {p['target']} (lock {p['lock_id']}, live state: {p['live_lock']}); "
             f"{len(p['shards'])} shard tables", f"cost: {p['cost_note']}"]
    if p.get("schemas_from_upstream"):
        lines.append(f"schema read from the upstream (no checkpoint yet): {', '.join(p['schemas_from_upstream'])}")
    if p.get("unknown_schemas"):
        lines.append(f"schema unknown (no checkpoint yet): {', '.join(p['unknown_schemas'])}")
    if p.get("in_flight"):
        lines.extend(_step(p["in_flight"]))
    for s in p["steps"]:
        lines.extend(_step(s))
    at = p.get("resolves_at")
    lines.append(f"lock resolves at step {at}" if at is not None and p["final_state"] in ("none", "resolved")
                 else f"lock after the last step: {p['final_state']}")
    prob = p.get("problem")
    if prob:
        lines.append(f"FIRST PROBLEM: step {prob['step']} ({prob['kind']}): {prob['message']}")
        lines.extend(f"  exit: {e}" for e in prob.get("exits", []))
    else:
        lines.append("no conflict, no table copy, the lock resolves")
    return "\n".join(lines)
