"""``coordinator.log_stream``: a process's stderr as one JSON stream (the pump on a real pipe)."""
import json
import os
import threading

from coordinator.log_stream import _pump


def test_json_passes_through_other_lines_are_wrapped_and_stack_traces_stay_one_record():
    r, w = os.pipe()
    out_r, out_w = os.pipe()
    t = threading.Thread(target=_pump, args=(r, out_w, "stderr"), daemon=True)
    t.start()
    own = json.dumps({"ts": "x", "level": "info", "component": "shardmerge.worker", "msg": "hello"})
    text = "\n".join([
        own,
        "Using Spark's default log4j profile: org/apache/spark/log4j2-defaults.properties",
        "26/12/06 10:39:13 WARN Utils: Your hostname resolves to a loopback address",
        "java.lang.IllegalStateException: boom",
        "\tat org.apache.spark.Foo.bar(Foo.scala:12)",
        "Caused by: java.io.IOException: closed",
        "\t... 3 more",
        "Traceback (most recent call last):",
        '  File "x.py", line 1, in <module>',
        "ValueError: bad",
        "",
    ])
    os.write(w, text.encode())
    os.close(w)
    t.join(5)
    os.close(out_w)
    got = b""
    while chunk := os.read(out_r, 65536):
        got += chunk
    recs = [json.loads(line) for line in got.decode().splitlines()]        # every line is JSON
    assert recs[0]["msg"] == "hello" and recs[0]["component"] == "shardmerge.worker"
    assert recs[1]["component"] == "stderr" and "log4j profile" in recs[1]["msg"]
    assert recs[2]["level"] == "warning"
    assert recs[3]["msg"].splitlines()[0] == "java.lang.IllegalStateException: boom"
    assert "Caused by: java.io.IOException" in recs[3]["msg"] and "... 3 more" in recs[3]["msg"]
    assert recs[4]["msg"].startswith("Traceback") and 'File "x.py"' in recs[4]["msg"]
    assert recs[4]["msg"].endswith("ValueError: bad") and len(recs) == 5
