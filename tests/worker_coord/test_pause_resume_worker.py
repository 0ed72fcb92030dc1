"""The worker's side of pause-task / resume-task: a subtask stopped in Error by an error a retry
cannot fix is restarted only when the task record gets a new revision (resume-task), and a
paused subtask reports ``Paused``.  Real etcd, MariaDB and Spark; the master's task-record
writes are the real ``Cluster.pause_task`` / ``resume_task`` with the test's fence."""
import yaml

from coordinator.etcdproto import SourceBinding, TaskRecord
from coordinator.master.cluster import Cluster
from worker.process import WorkerOptions, WorkerProcess

from ..worker.conftest import db_yaml, make_task, positions  # noqa: F401 (fixture)
from .conftest import ActingMaster, wait_for


def _status(store, task):
    items = store.list_status(task).items
    return items[0] if items else None


def test_resume_task_restarts_a_subtask_stopped_in_error(spark, services, store, etcd_prefix, source1_db,
                                                         downstream_db, positions, tmp_path):
    (p1,) = positions(source1_db)
    task, _, text = make_task(downstream_db, {"s1": source1_db}, start={"s1": p1})
    # the downstream password comes from a file that does not exist yet: a ConfigError, which a
    # retry cannot fix, so the subtask stops in Error and waits for the operator
    pw = tmp_path / "down.pw"
    doc = yaml.safe_load(text)
    doc["target-database"].pop("password")
    doc["target-database"]["password-file"] = str(pw)
    text = yaml.safe_dump(doc)
    source1_db.execute("CREATE TABLE orders_01 (id INT PRIMARY KEY, v INT)")
    source1_db.execute("INSERT INTO orders_01 VALUES (1, 1), (2, 2)")
    src_file = tmp_path / "s1.yaml"
    src_file.write_text(yaml.safe_dump({"source-id": "s1", "enable-gtid": True, "flavor": "mariadb",
                                        "from": db_yaml(source1_db.params)}))
    master = ActingMaster(store)
    cluster = Cluster(store)
    w = WorkerProcess(WorkerOptions(etcd=services.etcd, name="w-pr", source_file=str(src_file), prefix=etcd_prefix,
                                    ttl=5, resync_interval=1.0, poll_interval=0.2)).start()
    key = (task.name, "s1")
    try:
        store.put_binding(master.fence, SourceBinding("s1", "w-pr"))
        store.put_task(master.fence, TaskRecord(task=task.name, yaml=text, sources=["s1"]))
        st = wait_for(lambda: (s := _status(store, task.name)) and s.stage == "Error" and s, timeout=60,
                      what="subtask in Error")
        assert "cannot read password file" in st.detail["error"]["message"]
        first = w.subtasks[key]
        wait_for(lambda: not first.thread.is_alive(), what="failed subtask thread to return")
        # the stopped subtask's last write (not synced) follows the Error write: compare from here
        st = _status(store, task.name)
        w.reconcile()                      # same record revision: it stays stopped in Error
        assert w.subtasks[key] is first and _status(store, task.name).updated_at == st.updated_at

        # resume-task on a running task: new revision -> a new subtask tries again (and fails again)
        out = cluster.resume_task(master.fence, task.name, [])
        assert out.ok and "s1 was not paused" in out.msg
        wait_for(lambda: w.subtasks.get(key) not in (None, first), what="subtask restarted")
        second = w.subtasks[key]
        wait_for(lambda: (s := _status(store, task.name)) and s.stage == "Error" and s.updated_at != st.updated_at,
                 timeout=60, what="the restarted subtask to fail again")
        wait_for(lambda: not second.thread.is_alive(), what="second failed thread to return")

        # pausing a subtask stopped in Error: status Paused, the error it stopped on is kept
        assert cluster.pause_task(master.fence, task.name, []).ok
        st = wait_for(lambda: (s := _status(store, task.name)) and s.stage == "Paused" and s, timeout=30,
                      what="status Paused")
        assert st.detail["paused_by"] == "operator" and "resume-task" in st.detail["waiting_for"]
        assert "cannot read password file" in st.detail["error"]["message"]
        assert key not in w.subtasks

        # the operator fixes the cause and resumes: it replicates
        pw.write_text(downstream_db.params["password"] + "\n")
        assert cluster.resume_task(master.fence, task.name, []).ok
        wait_for(lambda: (s := _status(store, task.name)) and s.stage == "Running" and s.detail.get("checkpoint"),
                 timeout=120, what="status Running with progress")
        assert "error" not in _status(store, task.name).detail
        wait_for(lambda: downstream_db.execute("SELECT COUNT(*) FROM orders")[0][0] == 2, timeout=120,
                 what="rows replicated after resume")
    finally:
        w.stop()
        store.resign(master.fence)
