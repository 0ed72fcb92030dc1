"""The container image, built and run: ``deploy/Dockerfile`` built with podman, then etcd, a
master and a worker started from that image (host network) merge two shards of the dev MariaDB
into one table, and ``shardctl check`` (run from the image too) must report them equal.  Every
container runs as the Kubernetes manifests run it (``HARDENED``: read-only, no capabilities, uid
10001), etcd over TLS with client certificates and auth (``make-secrets``, the ``etcd-auth`` Job's
own script), the master on mutual TLS.

    scripts/image-test                 # build (cached when unchanged) and run; prints the figures
    scripts/image-test --rebuild-base --no-cache   # cold: new base, no layer cache

Long (a first build downloads Debian packages, PySpark and a JRE: minutes), so it is not part of
the pytest run; it has its own command.  The ``python:3.11-slim-bookworm`` base comes from Docker
Hub, which this kind of machine cannot reach: ``deploy/image/build-base`` builds a stand-in of it
from Debian packages with debootstrap and stores it under that name, and the Dockerfile builds
unchanged on top.  etcd runs in a container of the same image with the host's etcd binary
mounted read-only (the image has none; shardmerge does not ship etcd).

Podman in a sandbox: the flags ``podman_flags()`` adds are printed with each command and
explained in ``deploy/README.md`` (container ulimits equal to what this process may set; runc
where crun refuses a hybrid cgroup hierarchy).

Exit 0 when the check reports EQUAL; the figures (base build, image build, image size, merge
time) are printed as one ``[image-test] figures`` line and, with ``--json-out``, as JSON.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BASE_IMAGE = "docker.io/library/python:3.11-slim-bookworm"
IMAGE = "localhost/shardmerge:image-test"
PREFIX = "/shardmerge/image-test/"   # under the prefix the etcd role grants (etcd-auth.yaml)
TASK = "imagetest"
SOURCE = "source1"
SHARDS = ("img_shard_01", "img_shard_02")
TARGET = "img_merged"
ROWS = 2000
IN_CONTAINER = "/etc/shardmerge"     # where the source and task files are mounted


class ImageTestError(RuntimeError):
    """A step of the image test failed; the message names the step and carries its output."""


def say(msg: str) -> None:
    print(f"[image-test {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ----------------------------------------------------------------------------- podman
def podman_flags() -> list[str]:
    """Global-per-container flags that make podman run on a restricted host (no CAP_SYS_RESOURCE,
    cgroup v1 with a v2 mount beside it).  Harmless elsewhere.

    * ulimits: podman asks the runtime for nofile=1048576 and nproc=32768 (and lowers its own
      nproc to 32768 first); without CAP_SYS_RESOURCE raising a limit above the caller's is EPERM,
      so the container gets exactly the limits this process has (nproc at most 32768).
    * ``--runtime runc``: crun 1.8 (Debian 12) refuses "cgroups in hybrid mode"; runc accepts it.
    """
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    nproc = resource.getrlimit(resource.RLIMIT_NPROC)[1]
    nproc = 32768 if nproc == resource.RLIM_INFINITY else min(nproc, 32768)
    nofile = 1048576 if nofile == resource.RLIM_INFINITY else nofile
    flags = ["--ulimit", f"nofile={nofile}:{nofile}", "--ulimit", f"nproc={nproc}:{nproc}"]
    if hybrid_cgroups():
        flags += ["--runtime", "runc"]
    return flags


def hybrid_cgroups() -> bool:
    """cgroup v1 controllers with the v2 hierarchy mounted at /sys/fs/cgroup/unified."""
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return False
    kinds = {(f[1], f[2]) for f in (m.split() for m in mounts) if len(f) > 2}
    return ("/sys/fs/cgroup/unified", "cgroup2") in kinds and ("/sys/fs/cgroup", "cgroup2") not in kinds


def run(argv: list[str], what: str, timeout: float = 3600, capture: bool = True) -> str:
    r = subprocess.run(argv, cwd=ROOT, text=True, timeout=timeout,
                       stdout=subprocess.PIPE if capture else None, stderr=subprocess.STDOUT if capture else None)
    if r.returncode != 0:
        raise ImageTestError(f"{what} failed (exit {r.returncode}): {' '.join(argv)}\n{(r.stdout or '')[-4000:]}")
    return r.stdout or ""


def image_id(name: str) -> str:
    r = subprocess.run(["podman", "image", "inspect", "--format", "{{.Id}}", name], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else ""


def build(rebuild_base: bool, no_cache: bool, log_dir: Path) -> dict:
    """Stand-in base (deploy/image/build-base, cached), then the image (podman's layer cache
    unless ``no_cache``); their times and the image's size.  The image this run replaces is
    removed, so repeated runs do not pile up 1 GB images."""
    figures: dict = {}
    t = time.monotonic()
    cached = bool(image_id(BASE_IMAGE)) and not rebuild_base
    run([str(ROOT / "deploy/image/build-base"), *(["--force"] if rebuild_base else [])], "build-base", capture=False)
    figures["base_build_s"] = "cached" if cached else round(time.monotonic() - t, 1)
    before = image_id(IMAGE)
    argv = ["podman", "build", *podman_flags(), *(["--no-cache"] if no_cache else []),
            "-f", "deploy/Dockerfile", "-t", IMAGE, "."]
    say("$ " + " ".join(argv) + f"   (log: {log_dir / 'build.log'})")
    t = time.monotonic()
    with open(log_dir / "build.log", "w") as log:
        r = subprocess.run(argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, timeout=3600)
    figures["image_build_s"] = round(time.monotonic() - t, 1)
    if r.returncode != 0:
        tail = "\n".join((log_dir / "build.log").read_text(errors="replace").splitlines()[-40:])
        raise ImageTestError(f"podman build failed (exit {r.returncode}); log tail:\n{tail}")
    if before and before != image_id(IMAGE):
        subprocess.run(["podman", "rmi", before], capture_output=True)
    size = int(run(["podman", "image", "inspect", "--format", "{{.Size}}", IMAGE], "image inspect").strip())
    figures["image_size_mb"] = round(size / 1e6)
    say(f"built {IMAGE} in {figures['image_build_s']}s, {figures['image_size_mb']} MB")
    return figures


class Containers:
    """The containers this run started (unique names), removed at the end."""

    def __init__(self, work: Path):
        self.tag = uuid.uuid4().hex[:8]
        self.names: list[str] = []
        self.work = work

    def start(self, role: str, args: list[str], extra: list[str] | None = None) -> str:
        name = f"shardmerge-it-{role}-{self.tag}"
        argv = ["podman", "run", "-d", "--name", name, "--network", "host", *podman_flags(), *HARDENED,
                "-v", f"{self.work}:{IN_CONTAINER}:ro", *(extra or []), IMAGE, *args]
        say("$ " + " ".join(argv))
        run(argv, f"starting the {role} container")
        self.names.append(name)
        return name

    def shardctl(self, *args: str, entry: list[str] | None = None, env: list[str] | None = None) -> tuple[int, str]:
        """shardctl from the image (host network), with the work directory mounted; ``entry``
        replaces the entry point (e.g. a shell for the etcd auth Job's script)."""
        argv = ["podman", "run", "--rm", "--network", "host", *podman_flags(), *HARDENED, *(env or []),
                "-v", f"{self.work}:{IN_CONTAINER}:ro", *(entry or []), IMAGE, *args]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        return r.returncode, r.stdout + r.stderr

    def alive(self, name: str) -> bool:
        r = subprocess.run(["podman", "inspect", "--format", "{{.State.Running}}", name],
                           capture_output=True, text=True)
        return r.stdout.strip() == "true"

    def logs(self, name: str, n: int = 30) -> str:
        r = subprocess.run(["podman", "logs", "--tail", str(n), name], capture_output=True, text=True)
        return r.stdout + r.stderr

    def check_alive(self) -> None:
        for name in self.names:
            if not self.alive(name):
                raise ImageTestError(f"container {name} exited; its log:\n{self.logs(name)}")

    def remove(self) -> None:
        for name in reversed(self.names):
            with open(self.work / f"{name}.log", "w") as f:
                f.write(self.logs(name, 100000))
            subprocess.run(["podman", "rm", "-f", "-t", "20", name], capture_output=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait(cond, timeout: float, what: str, ctrs: Containers, interval: float = 1.0):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        ctrs.check_alive()
        last = cond()
        if last:
            return last
        time.sleep(interval)
    detail = "\n".join(f"---- {n}:\n{ctrs.logs(n)}" for n in ctrs.names)
    raise ImageTestError(f"timed out after {timeout:.0f}s waiting for {what}; last: {last!r}\n{detail}")


def http_ok(addr: str, path: str, ca: str = "") -> bool:
    """``GET`` answered 200 (over HTTPS checked against ``ca`` when given)."""
    ctx = ssl.create_default_context(cafile=ca) if ca else None
    try:
        with urllib.request.urlopen(f"{'https' if ca else 'http'}://{addr}{path}", timeout=2, context=ctx) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError):
        return False


# the containers as the Kubernetes manifests run them: no root filesystem to write, no
# capabilities, no privilege escalation, uid 10001 (the image's user), scratch and home in a tmpfs
# at /tmp (this podman ignores a tmpfs's mode elsewhere: a tmpfs on /home/shardmerge is root's)
HARDENED = ["--read-only", "--cap-drop=ALL", "--security-opt=no-new-privileges", "--user=10001:10001",
            "--tmpfs=/tmp:rw,size=2g,mode=1777", "-e", "HOME=/tmp"]


def pki(work: Path) -> dict[str, str]:
    """``deploy/k8s/make-secrets`` into ``work/pki`` (readable by the containers' user), and the
    paths the containers see."""
    d = work / "pki"
    run([str(ROOT / "deploy/k8s/make-secrets"), str(d)], "make-secrets")
    d.chmod(0o755)
    for f in d.iterdir():
        f.chmod(0o644)        # a test's throwaway keys, mounted read-only for uid 10001
    at = f"{IN_CONTAINER}/pki"
    return {"dir": str(d), "at": at}


def etcd_env(at: str, endpoint: str) -> list[str]:
    """``ConfigMap/shardmerge``'s etcd variables, as ``podman run -e`` flags."""
    env = {"SHARDMERGE_ETCD": endpoint, "SHARDMERGE_ETCD_CACERT": f"{at}/ca.crt",
           "SHARDMERGE_ETCD_CERT": f"{at}/etcd-client.crt", "SHARDMERGE_ETCD_KEY": f"{at}/etcd-client.key",
           "SHARDMERGE_ETCD_USER": "shardmerge", "SHARDMERGE_ETCD_PASSWORD_FILE": f"{at}/shardmerge-password"}
    return [x for k, v in env.items() for x in ("-e", f"{k}={v}")]


def auth_job_script(at: str) -> str:
    """The script of ``deploy/k8s/etcd-auth.yaml``'s Job, reading the passwords from ``at``."""
    import yaml
    job = next(d for d in yaml.safe_load_all((ROOT / "deploy/k8s/etcd-auth.yaml").read_text()) if d)
    return job["spec"]["template"]["spec"]["containers"][0]["args"][0].replace("/etc/shardmerge/etcd-auth/", f"{at}/")


# ----------------------------------------------------------------------------- the dev MariaDB
def services() -> dict:
    """Start (or reuse) the dev services set of this environment and return its addresses.
    Tried three times: on a loaded machine (right after a build) a running etcd can miss the
    health probe's 1 s deadline, and ``start`` then reports its port as taken."""
    for attempt in range(3):
        try:
            run([sys.executable, str(ROOT / "scripts/devservices.py"), "start"], "scripts/services start")
            break
        except ImageTestError as e:
            if attempt == 2:
                raise
            say(f"{e}; trying again in 5 s")
            time.sleep(5)
    state = Path(os.environ.get("SHARDMERGE_SERVICES_DIR", ROOT / ".services"))
    return json.loads((state / "addresses.json").read_text())


def sql(params: dict, *stmts: str) -> list:
    import pymysql
    with pymysql.connect(host=params["host"], port=params["port"], user=params["user"],
                         password=params["password"], autocommit=True) as c, c.cursor() as cur:
        rows: list = []
        for s in stmts:
            cur.execute(s)
            rows = list(cur.fetchall())
        return rows


def prepare(svc: dict, work: Path, etcd: str) -> tuple[str, str]:
    """Two shard schemas on source1 with ROWS rows each; the source and task files."""
    up, down = svc["mysql"][SOURCE], svc["mysql"]["downstream"]
    sql(up, *[f"DROP DATABASE IF EXISTS `{s}`" for s in SHARDS])
    sql(down, f"DROP DATABASE IF EXISTS `{TARGET}`", f"DROP DATABASE IF EXISTS `{TASK}_meta`")
    for n, schema in enumerate(SHARDS, 1):
        rows = ", ".join(f"({n * 1_000_000 + i}, 'row {i}', {i % 113})" for i in range(1, ROWS + 1))
        sql(up, f"CREATE DATABASE `{schema}`",
            f"CREATE TABLE `{schema}`.orders (id BIGINT PRIMARY KEY, note VARCHAR(64) NOT NULL, qty INT NOT NULL)",
            f"INSERT INTO `{schema}`.orders VALUES {rows}")
    (work / "source.yaml").write_text(f"""source-id: {SOURCE}
flavor: mariadb
enable-gtid: true
from: {{host: "{up['host']}", port: {up['port']}, user: "{up['user']}", password: "{up['password']}"}}
""")
    (work / "task.yaml").write_text(f"""name: {TASK}
task-mode: all
shard-mode: optimistic
meta-schema: {TASK}_meta
target-database: {{host: "{down['host']}", port: {down['port']}, user: "{down['user']}", password: "{down['password']}"}}
block-allow-list:
  shards: {{do-dbs: ["{SHARDS[0]}", "{SHARDS[1]}"]}}
routes:
  schema: {{schema-pattern: "img_shard_*", target-schema: {TARGET}}}
  table: {{schema-pattern: "img_shard_*", table-pattern: "orders", target-schema: {TARGET}, target-table: orders}}
mysql-instances:
  - {{source-id: {SOURCE}, block-allow-list: shards, route-rules: [schema, table]}}
""")
    for f in ("source.yaml", "task.yaml"):
        (work / f).chmod(0o644)    # read by uid 10001 in the containers
    return f"{IN_CONTAINER}/source.yaml", f"{IN_CONTAINER}/task.yaml"


def changes(up: dict) -> None:
    """Binlog work after the full load: writes, then an optimistic shard DDL on both shards."""
    for n, schema in enumerate(SHARDS, 1):
        sql(up, f"INSERT INTO `{schema}`.orders VALUES " + ", ".join(
                f"({n * 1_000_000 + i}, 'late {i}', {i})" for i in range(ROWS + 1, ROWS + 301)),
            f"UPDATE `{schema}`.orders SET qty = qty + 7 WHERE id % 5 = 0",
            f"DELETE FROM `{schema}`.orders WHERE id % 11 = 0")
    for schema in SHARDS:
        sql(up, f"ALTER TABLE `{schema}`.orders ADD COLUMN tag VARCHAR(16) NOT NULL DEFAULT 'x'")
    for n, schema in enumerate(SHARDS, 1):
        sql(up, f"INSERT INTO `{schema}`.orders VALUES " + ", ".join(
            f"({n * 1_000_000 + i}, 'after ddl {i}', {i}, 't{n}')" for i in range(ROWS + 301, ROWS + 401)))


# ----------------------------------------------------------------------------- the run
def merge(svc: dict, work: Path) -> dict:
    etcd_port, etcd_peer, etcd_metrics = free_port(), free_port(), free_port()
    grpc, metrics, wmetrics = free_port(), free_port(), free_port()
    etcd = f"https://127.0.0.1:{etcd_port}"
    source_file, task_file = prepare(svc, work, etcd)
    keys = pki(work)
    at, local = keys["at"], keys["dir"]
    ctrs = Containers(work)
    etcd_bin = shutil.which("etcd") or "/usr/bin/etcd"
    figures: dict = {}
    try:
        # etcd as deploy/k8s/etcd.yaml runs it: TLS for clients and peers, client certificates
        ctrs.start("etcd", ["--name", "image-test", "--data-dir", "/tmp/etcd",
                            "--listen-client-urls", etcd, "--advertise-client-urls", etcd,
                            "--listen-peer-urls", f"https://127.0.0.1:{etcd_peer}",
                            "--initial-advertise-peer-urls", f"https://127.0.0.1:{etcd_peer}",
                            "--initial-cluster", f"image-test=https://127.0.0.1:{etcd_peer}",
                            "--client-cert-auth", f"--trusted-ca-file={at}/ca.crt",
                            f"--cert-file={at}/etcd.crt", f"--key-file={at}/etcd.key",
                            "--peer-client-cert-auth", f"--peer-trusted-ca-file={at}/ca.crt",
                            f"--peer-cert-file={at}/etcd.crt", f"--peer-key-file={at}/etcd.key",
                            "--listen-metrics-urls", f"http://127.0.0.1:{etcd_metrics}"],
                   ["--entrypoint", "/usr/local/bin/etcd", "-v", f"{etcd_bin}:/usr/local/bin/etcd:ro"])
        wait(lambda: http_ok(f"127.0.0.1:{etcd_metrics}", "/health"), 60, "etcd to be healthy", ctrs, 0.5)
        # the auth Job's own script, with the image's etcdctl
        env = etcd_env(at, etcd)
        rc, out = ctrs.shardctl("-c", auth_job_script(at), entry=["--entrypoint", "/bin/sh"], env=env)
        if rc != 0 or "Authentication Enabled" not in out:
            raise ImageTestError(f"the etcd auth Job's script failed (exit {rc}): {out}")
        say("etcd: TLS with client certificates, auth enabled (user shardmerge on /shardmerge/ only)")
        tls = [f"--ssl-ca={at}/ca.crt", f"--ssl-cert={at}/master.crt", f"--ssl-key={at}/master.key"]
        ctrs.start("master", ["master", "--etcd", etcd, "--listen", f"127.0.0.1:{grpc}", "--prefix", PREFIX,
                              "--name", "image-master", "--election-ttl", "5",
                              "--metrics-addr", f"127.0.0.1:{metrics}", *tls,
                              "--cert-allowed-cn", "shardmerge-master,shardmerge-operator"], env)
        wait(lambda: http_ok(f"127.0.0.1:{metrics}", "/readyz", ca=f"{local}/ca.crt"), 120,
             "the master to be ready", ctrs, 0.5)
        ctrs.start("worker", ["worker", "--etcd", etcd, "--source", source_file, "--prefix", PREFIX,
                              "--name", "image-worker", "--ttl", "5", "--spark-master", "local[1]",
                              "--metrics-addr", f"127.0.0.1:{wmetrics}"], env)
        addr = ["--master-addr", f"127.0.0.1:{grpc}", "--ssl-ca", f"{at}/ca.crt",
                "--ssl-cert", f"{at}/operator.crt", "--ssl-key", f"{at}/operator.key"]

        def bound():
            rc, out = ctrs.shardctl(*addr, "operate-source", "show")
            return rc == 0 and '"image-worker"' in out and out
        wait(bound, 120, f"{SOURCE} to be bound to the worker", ctrs, 2)
        t0 = time.monotonic()
        rc, out = ctrs.shardctl(*addr, "start-task", task_file)
        if rc != 0:
            raise ImageTestError(f"shardctl start-task failed (exit {rc}): {out}")
        say(f"task {TASK} started: {ROWS} rows in each of {', '.join(SHARDS)} -> {TARGET}.orders")

        def syncing():
            rc, out = ctrs.shardctl(*addr, "query-status", TASK)
            if rc != 0:
                return False
            doc = json.loads(out)
            subs = [s["subTaskStatus"][0] for s in doc.get("sources", []) if s.get("subTaskStatus")]
            return bool(subs) and all(s["stage"] == "Running" and s["unit"] == "Sync" for s in subs)
        wait(syncing, 600, "the full load to finish and the subtask to follow the binlog", ctrs, 3)
        figures["full_load_s"] = round(time.monotonic() - t0, 1)
        say(f"full load done in {figures['full_load_s']}s; writes and ADD COLUMN on both shards")
        changes(svc["mysql"][SOURCE])
        check = ["check", "--task-file", task_file, "--source-file", source_file]
        last = {"out": ""}

        def equal():
            rc, last["out"] = ctrs.shardctl(*addr, "--format", "table", *check)
            return rc == 0
        try:
            wait(equal, 300, "shardctl check to report EQUAL", ctrs, 3)
        except ImageTestError as e:
            raise ImageTestError(f"{e}\nlast check:\n{last['out']}") from None
        figures["merge_s"] = round(time.monotonic() - t0, 1)
        print(last["out"].rstrip(), flush=True)
        down = sql(svc["mysql"]["downstream"], f"SELECT COUNT(*) FROM `{TARGET}`.orders")[0][0]
        cols = [r[0] for r in sql(svc["mysql"]["downstream"], f"SHOW COLUMNS FROM `{TARGET}`.orders")]
        if "tag" not in cols:
            raise ImageTestError(f"the merged table lacks the shards' new column: {cols}")
        figures["rows_merged"] = down
        say(f"check EQUAL: {down} rows in {TARGET}.orders (columns {', '.join(cols)}), "
            f"{figures['merge_s']}s from start-task")
        ctrs.shardctl(*addr, "stop-task", TASK)
        return figures
    finally:
        ctrs.remove()
        say(f"containers removed; their logs are in {work}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rebuild-base", action="store_true", help="rebuild the stand-in base image")
    ap.add_argument("--no-cache", action="store_true", help="build the image without podman's layer cache "
                    "(a cold build: apt and PyPI downloads included)")
    ap.add_argument("--json-out", default="", help="also write the figures as JSON to this file")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("image-test: needs root (podman with the host network, debootstrap)", file=sys.stderr)
        return 2
    sys.path.insert(0, str(ROOT))
    state = Path(os.environ.get("SHARDMERGE_SERVICES_DIR", ROOT / ".services"))
    work = state / "image-test"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    work.chmod(0o755)
    try:
        figures = build(args.rebuild_base, args.no_cache, work)
        figures.update(merge(services(), work))
    except (ImageTestError, subprocess.TimeoutExpired) as e:
        say(f"FAILED: {e}")
        return 1
    say("figures " + " ".join(f"{k}={v}" for k, v in figures.items()))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
