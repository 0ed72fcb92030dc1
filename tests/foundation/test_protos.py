"""The committed gRPC stubs are exactly what scripts/gen-protos produces from protos/*.proto."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_generated_stubs_are_fresh(tmp_path):
    r = subprocess.run(["bash", str(ROOT / "scripts" / "gen-protos"), str(tmp_path)],
                       cwd=ROOT, capture_output=True, text=True, env={"PYTHON": sys.executable, "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    for proto in sorted((ROOT / "protos").glob("*.proto")):
        for suffix in ("_pb2.py", "_pb2_grpc.py"):
            name = proto.stem + suffix
            fresh = (tmp_path / "protos" / name).read_text()
            committed = (ROOT / "protos" / name).read_text()
            assert committed == fresh, f"protos/{name} is stale: run scripts/gen-protos and commit"


def test_stubs_import_and_define_the_master_service():
    from protos import master_pb2, master_pb2_grpc
    names = {m.name for m in master_pb2.DESCRIPTOR.services_by_name["Master"].methods}
    assert {"StartTask", "StopTask", "QueryStatus", "ShowDDLLocks", "UnlockDDLLock"} <= names
    assert hasattr(master_pb2_grpc, "MasterStub")
