"""Passwords never appear in anything shardmerge prints.

A real master and worker run with passwords given every way the configs allow: literal in the
source YAML and in a task's ``target-database``, through ``password-file`` and ``password-env``.
Errors are provoked on purpose — a wrong downstream password, an unreachable upstream, invalid
YAML carrying a password, ``shardctl check`` against the wrong password — and then EVERY output is
searched for each password: both process logs (stdout + stderr), ``/metrics``, the JSON of
``query-status`` / ``get-config`` / ``show-ddl-locks`` / ``operate-source show`` / ``list-member``
and the CLI's error output.  ``get-config`` must show the passwords masked.
"""
from __future__ import annotations

import json
import signal
import urllib.request
import uuid
from pathlib import Path

import pymysql
import yaml

from tests.support.ports import free_port
from tests.support.procs import SHARDCTL, Proc
from tests.support.probes import shardctl, wait_for


def _secret(tag: str) -> str:
    return f"Pw{tag}-{uuid.uuid4().hex[:12]}-zq"


def _ctl(addr: str, *argv: str) -> tuple[int, str]:
    rc, out, err = shardctl(addr, *argv)
    return rc, out + err


def _user(params: dict, name: str, password: str, drop: bool = False, grant: bool = False) -> None:
    with pymysql.connect(**params, autocommit=True) as c, c.cursor() as cur:
        cur.execute(f"DROP USER IF EXISTS '{name}'@'127.0.0.1'")
        if not drop:
            cur.execute(f"CREATE USER '{name}'@'127.0.0.1' IDENTIFIED BY %s", (password,))
            if grant:
                cur.execute(f"GRANT ALL ON *.* TO '{name}'@'127.0.0.1'")
            cur.execute(f"GRANT ALL PRIVILEGES ON *.* TO '{name}'@'127.0.0.1'")


def _stages(addr: str, task: str) -> dict:
    rc, text = _ctl(addr, "query-status", task)
    doc = json.loads(text)
    return {s["sourceStatus"]["source"]: st for s in doc.get("sources", []) for st in s.get("subTaskStatus") or []}


def test_passwords_never_printed(services, etcd_prefix, etcd_client, source1_db, downstream_db, tmp_path):
    s_src, s_env, s_down, s_file, s_bad = (_secret(t) for t in ("Src", "Env", "Down", "File", "Bad"))
    secrets = {"source literal": s_src, "source password-env": s_env, "task literal": s_down,
               "task password-file": s_file, "invalid yaml": s_bad}
    user = f"leak_{uuid.uuid4().hex[:8]}"
    up, down = services.mysql["source1"], services.mysql["downstream"]
    _user(up, user, s_src)
    _user(down, user, s_down)
    procs: list[Proc] = []
    outputs: dict[str, str] = {}
    try:
        # ---------------------------------------------------------------- configs
        s1 = tmp_path / "s1.yaml"
        s1.write_text(yaml.safe_dump({"source-id": "s1", "enable-gtid": True, "flavor": "mariadb",
                                      "from": {"host": up["host"], "port": up["port"], "user": user,
                                               "password": s_src}}))
        s2 = tmp_path / "s2.yaml"        # unreachable upstream, password from the environment
        s2.write_text(yaml.safe_dump({"source-id": "s2", "enable-gtid": True, "flavor": "mariadb",
                                      "from": {"host": "127.0.0.1", "port": free_port(), "user": user,
                                               "password-env": "SHARDMERGE_LEAK_TEST_PW"}}))
        pwfile = tmp_path / "down.pw"
        pwfile.write_text(s_file + "\n")  # WRONG password for the downstream user

        def task(name, sources, target):
            routes = {f"r-{s}": {"schema-pattern": source1_db.name, "table-pattern": "t*",
                                 "target-schema": downstream_db.name, "target-table": "t"} for s in sources}
            return {"name": name, "task-mode": "incremental", "shard-mode": "optimistic",
                    "meta-schema": downstream_db.name, "target-database": target, "routes": routes,
                    "block-allow-list": {"bal": {"do-dbs": [source1_db.name]}},
                    "mysql-instances": [{"source-id": s, "route-rules": [f"r-{s}"], "block-allow-list": "bal"}
                                        for s in sources]}
        good = tmp_path / "good.yaml"
        good.write_text(yaml.safe_dump(task("leak_good", ["s1"], {"host": down["host"], "port": down["port"],
                                                                  "user": user, "password": s_down})))
        bad = tmp_path / "bad.yaml"
        bad.write_text(yaml.safe_dump(task("leak_bad", ["s1", "s2"], {
            "host": down["host"], "port": down["port"], "user": user, "password-file": str(pwfile)})))
        broken = tmp_path / "broken.yaml"     # invalid: an unknown key next to a literal password
        broken.write_text(yaml.safe_dump(task("leak_broken", ["s1"], {
            "host": down["host"], "port": down["port"], "user": user, "password": s_bad, "pasword": s_bad})))
        broken_src = tmp_path / "broken-src.yaml"
        broken_src.write_text(f"source-id: s3\nflavor: mariadb\nfrom:\n  host: 127.0.0.1\n  port: not-a-port\n"
                              f"  user: {user}\n  password: {s_bad}\n")

        # ---------------------------------------------------------------- processes
        addr, maddr = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
        wmetrics = f"127.0.0.1:{free_port()}"
        master = Proc("master", [SHARDCTL, "master", "--etcd", services.etcd, "--listen", addr, "--prefix",
                                 etcd_prefix, "--election-ttl", "3", "--metrics-addr", maddr], tmp_path)
        worker = Proc("worker", [SHARDCTL, "worker", "--etcd", services.etcd, "--source", str(s1), "--name", "w1",
                                 "--prefix", etcd_prefix, "--ttl", "3", "--spark-master", "local[1]",
                                 "--metrics-addr", wmetrics], tmp_path, env={"SHARDMERGE_LEAK_TEST_PW": s_env})
        procs += [master.start(), worker.start()]
        diag = lambda: "\n".join(f"--- {p.name}:\n{p.tail(20)}" for p in procs)  # noqa: E731
        wait_for(lambda: _ctl(addr, "operate-source", "show")[0] == 0
                 and '"s1"' in _ctl(addr, "operate-source", "show")[1], 90, "s1 registered by its worker", diag)
        def create_s2():
            rc, text = _ctl(addr, "operate-source", "create", str(s2))
            outputs["operate-source create s2"] = outputs.get("operate-source create s2", "") + text
            return rc == 0 or "already exists" in text
        wait_for(create_s2, 60, "operate-source create s2",
                 lambda: outputs.get("operate-source create s2", "") + diag())
        outputs["operate-source create broken"] = _ctl(addr, "operate-source", "create", str(broken_src))[1]
        source1_db.execute("CREATE TABLE t1 (id INT PRIMARY KEY, v INT)")
        downstream_db.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)")   # no meta: starts after t1's CREATE
        rc, text = _ctl(addr, "start-task", str(good))
        assert rc == 0, text + diag()
        outputs["start-task good"] = text
        # the precheck refuses the bad task (wrong downstream password; s2's password-env is only in
        # the worker, so s2 is not checked): its messages are searched too; then it is started anyway
        rc, text = _ctl(addr, "start-task", str(bad))
        assert rc != 0 and "not started: pre-check failed" in text and "downstream_connection" in text, text
        outputs["start-task bad (refused by the precheck)"] = text
        rc, text = _ctl(addr, "check-task", str(bad))
        assert rc != 0 and "the master cannot read the password of source s2" in text, text
        outputs["check-task bad"] = text
        rc, text = _ctl(addr, "start-task", "--skip-precheck", str(bad))
        assert rc == 0, text + diag()
        outputs["start-task bad"] = text
        rc, text = _ctl(addr, "start-task", str(broken))
        assert rc != 0, f"an invalid task was accepted: {text}"
        outputs["start-task broken"] = text
        # the good task replicates; the bad one fails on both sources, visibly
        wait_for(lambda: _stages(addr, "leak_good").get("s1", {}).get("stage") == "Running", 180,
                 "leak_good Running", diag)
        source1_db.execute("INSERT INTO t1 VALUES (1, 1), (2, 2)")
        wait_for(lambda: downstream_db.execute("SELECT COUNT(*) FROM t")[0][0] == 2, 120,
                 "rows of leak_good downstream", diag)

        def bad_errors():
            st = _stages(addr, "leak_bad")
            got = {s: (st.get(s, {}).get("stage"), st.get(s, {}).get("error", ""),
                       st.get(s, {}).get("waitingFor", "")) for s in ("s1", "s2")}
            # s1: a wrong password needs a fix (Error); s2: a server that is down is waited for
            return got if got["s1"][0] == "Error" and got["s1"][1] and "unreachable" in got["s2"][2] else None
        seen = wait_for(bad_errors, 180, "leak_bad: s1 Error (wrong password), s2 waiting (unreachable)", diag)
        assert "Access denied" in seen["s1"][1], seen
        assert "2003" in seen["s2"][1] or "Can't connect" in seen["s2"][1], seen

        # ---------------------------------------------------------------- every output
        for argv in (("query-status",), ("query-status", "leak_bad"), ("query-status", "leak_good"),
                     ("--format", "table", "query-status", "leak_bad"), ("get-config", "task", "leak_good"),
                     ("get-config", "task", "leak_bad"), ("get-config", "source", "s1"),
                     ("get-config", "source", "s2"), ("show-ddl-locks",), ("operate-source", "show"),
                     ("list-member",), ("get-config", "task", "leak_nope")):
            outputs["shardctl " + " ".join(argv)] = _ctl(addr, *argv)[1]
        masked = outputs["shardctl get-config task leak_good"] + outputs["shardctl get-config source s1"]
        assert masked.count("******") >= 2, masked
        outputs["check bad"] = _ctl(addr, "check", "--task-file", str(bad), "--source-file", str(s1),
                                    "--source-file", str(s2))[1]
        outputs["check good"] = _ctl(addr, "check", "--task-file", str(good), "--source-file", str(s1))[1]
        assert '"equal": true' in outputs["check good"], outputs["check good"]
        for name, a in (("master", maddr), ("worker", wmetrics)):
            with urllib.request.urlopen(f"http://{a}/metrics", timeout=5) as r:
                outputs[f"{name} /metrics"] = r.read().decode()
        # the unreachable master: the CLI's own error line
        outputs["unreachable master"] = _ctl(f"127.0.0.1:{free_port()}", "query-status")[1]
    finally:
        for p in procs:
            p.kill(signal.SIGTERM, timeout=30)
        _user(up, user, "", drop=True)
        _user(down, user, "", drop=True)
    for p in procs:
        outputs[f"{p.name} log"] = p.log_path.read_text(errors="replace")
    assert "Access denied" in outputs["worker log"], "the wrong password was never tried (test is blind)"
    assert len(outputs["worker log"]) > 1000 and len(outputs["master log"]) > 200
    leaks = [f"{what} password in {where}" for where, text in outputs.items()
             for what, secret in secrets.items() if secret in text]
    assert not leaks, "passwords printed:\n" + "\n".join(leaks) + "\n" + "\n".join(
        f"--- {where}: {text[max(0, text.find(s) - 300):text.find(s) + 100]}"
        for where, text in outputs.items() for s in secrets.values() if s in text)
    Path(tmp_path / "outputs.json").write_text(json.dumps(outputs, indent=1))
