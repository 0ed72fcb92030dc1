#!/usr/bin/env python3
"""Local development services for shardmerge: one etcd, two upstream MariaDB, one downstream
MariaDB, and the same three roles on MySQL 9.7 (run from a Debian-unstable chroot, because
Debian 12 has no MySQL server and 9.7 needs a newer libc than the host's).

Stdlib only, so it runs before the project's venv exists (CI calls it first).  Every
server listens on loopback with ports that avoid the defaults (3306, 2379), keeps its
data under ``<repo>/.services/`` (git-ignored) and is started idempotently: ``start``
on a running set only checks it answers.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STATE = Path(os.environ.get("SHARDMERGE_SERVICES_DIR", ROOT / ".services"))
HOST = "127.0.0.1"
USER = "shardmerge"
PASSWORD = "shardmerge"


@dataclass(frozen=True)
class MariaDB:
    name: str
    port: int
    server_id: int
    binlog: bool

    @property
    def dir(self) -> Path:
        return STATE / self.name

    @property
    def socket(self) -> Path:
        return self.dir / "mysqld.sock"

    @property
    def pidfile(self) -> Path:
        return self.dir / "mysqld.pid"


# A second set (e.g. a CI rehearsal from a fresh clone beside a running dev set) can shift
# every port with SHARDMERGE_SERVICES_PORT_OFFSET.
_OFFSET = int(os.environ.get("SHARDMERGE_SERVICES_PORT_OFFSET", "0"))
ETCD_CLIENT_PORT = 23790 + _OFFSET
ETCD_PEER_PORT = 23800 + _OFFSET
MARIADBS = (
    MariaDB("source1", 33061 + _OFFSET, 101, True),
    MariaDB("source2", 33062 + _OFFSET, 102, True),
    MariaDB("downstream", 33063 + _OFFSET, 200, False),
)
APT_PACKAGES = {"etcd": "etcd-server", "etcdctl": "etcd-client",
                "mariadbd": "mariadb-server", "mariadb": "mariadb-client",
                "openssl": "openssl",   # the security tests make their own certificates
                "debootstrap": "debootstrap",   # the MySQL chroot (ensure_mysql_root)
                "pt-online-schema-change": "percona-toolkit",   # the online-DDL tests run the real tool
                "sysbench": "sysbench",   # bench/vs_native.py's load generator (its own Lua OLTP workloads)
                "promtool": "prometheus",   # tests/monitoring checks and unit-tests deploy/monitoring/alerts.yml
                "chromium": "chromium", "chromedriver": "chromium-driver"}   # the web page test drives a real browser



@dataclass(frozen=True)
class MySQL:
    """A MySQL server run inside the chroot at ``MYSQL_ROOT``.  Its data lives in the chroot
    (``/var/lib/shardmerge-sets/<port>``): the server sees only the chroot's files, and the port
    already tells the sets apart."""
    name: str
    port: int
    server_id: int
    binlog: bool

    @property
    def inner(self) -> str:
        return f"/var/lib/shardmerge-sets/{self.port}"

    @property
    def dir(self) -> Path:
        return MYSQL_ROOT / self.inner.lstrip("/")

    @property
    def pidfile(self) -> Path:
        return self.dir / "mysqld.pid"


# Where the MySQL chroot lives: once per machine (about 3 minutes to make, mostly download),
# shared by every clone and every private set.
MYSQL_ROOT = Path(os.environ.get("SHARDMERGE_MYSQL_ROOT", "/var/lib/shardmerge/mysql-root"))
MYSQL_SUITE = "sid"          # Debian unstable: mysql-server-core 9.7
MYSQLS = (
    MySQL("mysql1", 33071 + _OFFSET, 301, True),
    MySQL("mysql2", 33072 + _OFFSET, 302, True),
    MySQL("mysql-downstream", 33073 + _OFFSET, 400, False),
)

# The private sets of tests/chaos/services.py (chaos run, recovery tests) sit at these offsets
# above this set's; their ports are reserved together with ours.
PRIVATE_SET_OFFSETS = (2000, 2100)
_RESERVED = Path("/proc/sys/net/ipv4/ip_local_reserved_ports")


def reserve_ports() -> None:
    """Keep the kernel from handing our service ports (and the private sets') to outgoing
    connections: the MariaDB ports lie in Linux's ephemeral range (32768-60999), and a client
    socket that happens to sit on one makes a server start fail with "address in use".
    Best effort: needs root (CI runs as root); elsewhere the ports are simply not reserved."""
    base = ([ETCD_CLIENT_PORT, ETCD_PEER_PORT, ETCD_CLIENT_PORT + 2] + [m.port for m in MARIADBS]
            + [m.port for m in MYSQLS])
    want = {p + extra for p in base for extra in (0, *PRIVATE_SET_OFFSETS)}
    try:
        lo, hi = (int(x) for x in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
        cur = _RESERVED.read_text().strip()
        have = set()
        for part in filter(None, cur.split(",")):
            a, _, b = part.partition("-")
            have.update(range(int(a), int(b or a) + 1))
        add = sorted(p for p in want if lo <= p <= hi and p not in have)
        if add:
            _RESERVED.write_text(",".join(filter(None, [cur, *map(str, add)])))
    except (OSError, ValueError):
        pass


class ServiceError(RuntimeError):
    """A service could not be installed, started or reached; the message says which and why."""


def log(msg: str) -> None:
    print(f"[services] {msg}", flush=True)


def _which(cmd: str) -> str | None:
    return shutil.which(cmd) or next(
        (str(p) for d in ("/usr/sbin", "/usr/bin") if (p := Path(d) / cmd).exists()), None)


def install_missing() -> None:
    missing = sorted({pkg for cmd, pkg in APT_PACKAGES.items() if not _which(cmd)})
    if not missing:
        return
    log(f"installing from apt: {' '.join(missing)}")
    sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (sudo + ["apt-get", "update", "-qq"],
                sudo + ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing]):
        r = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if r.returncode != 0:
            raise ServiceError(f"apt failed ({' '.join(cmd)}): {r.stderr.strip()[-2000:]}")


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((HOST, port)) == 0


def _pid_alive(pidfile: Path) -> int | None:
    """The pid in ``pidfile`` while that process runs.  A process that has exited but was
    started by this one (a test restarting a server) stays a zombie until reaped: it is reaped
    here and counts as stopped, or a stop would wait its whole timeout for it."""
    try:
        pid = int(pidfile.read_text().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    try:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return None
    except ChildProcessError:          # not our child: signal 0 said it runs
        pass
    return pid


def _wait(what: str, check, timeout: float, logfile: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    tail = logfile.read_text(errors="replace")[-3000:] if logfile.exists() else "(no log)"
    raise ServiceError(f"{what} did not answer within {timeout:.0f}s; log {logfile}:\n{tail}")


# ---------------------------------------------------------------- etcd
def _etcd_dir() -> Path:
    return STATE / "etcd"


def etcd_healthy() -> bool:
    try:
        with urllib.request.urlopen(f"http://{HOST}:{ETCD_CLIENT_PORT}/health", timeout=1) as r:
            return json.loads(r.read()).get("health") == "true"
    except Exception:
        return False


def start_etcd() -> None:
    d = _etcd_dir()
    d.mkdir(parents=True, exist_ok=True)
    if _pid_alive(d / "etcd.pid"):
        # ours and running: a slow health answer on a loaded machine is not "someone else's"
        _wait("etcd", etcd_healthy, 30, d / "etcd.log")
        return
    if _port_open(ETCD_CLIENT_PORT):
        raise ServiceError(f"port {ETCD_CLIENT_PORT} is taken by a process that is not our etcd")
    url_c, url_p = f"http://{HOST}:{ETCD_CLIENT_PORT}", f"http://{HOST}:{ETCD_PEER_PORT}"
    cmd = [_which("etcd") or "etcd", "--name", "shardmerge", "--data-dir", str(d / "data"),
           "--listen-client-urls", url_c, "--advertise-client-urls", url_c,
           "--listen-peer-urls", url_p, "--initial-advertise-peer-urls", url_p,
           # history kept 2 minutes: a bench run writes ~60 MB of it (bench/lock_bench.py), and
           # back-to-back runs filled the 2 GB quota within the hour of history (then every write
           # fails with "mvcc: database space exceeded"); the map freelist is etcd 3.5's default
           # (deploy/k8s/etcd.yaml runs 3.5; Debian has 3.4)
           "--initial-cluster", f"shardmerge={url_p}", "--auto-compaction-retention", "2m",
           "--experimental-backend-bbolt-freelist-type", "map",
           "--listen-metrics-urls", f"http://{HOST}:{ETCD_CLIENT_PORT + 2}"]
    logf = d / "etcd.log"
    with open(logf, "ab") as out:
        p = subprocess.Popen(cmd, stdout=out, stderr=out, stdin=subprocess.DEVNULL,
                             start_new_session=True)
    (d / "etcd.pid").write_text(str(p.pid))
    _wait("etcd", etcd_healthy, 30, logf)


# ---------------------------------------------------------------- MariaDB
def _cnf(m: MariaDB) -> str:
    lines = [
        "[mariadbd]", f"datadir={m.dir / 'data'}", f"socket={m.socket}", f"port={m.port}",
        f"bind-address={HOST}", f"pid-file={m.pidfile}", f"log-error={m.dir / 'error.log'}",
        f"server_id={m.server_id}", "skip-name-resolve", "character-set-server=utf8mb4",
        "collation-server=utf8mb4_general_ci", "max_connections=400",
        "innodb_buffer_pool_size=96M", "innodb_log_file_size=64M",
        # Dev speed: flush at most once a second; a killed mariadbd still loses nothing
        # committed (only an OS crash would).
        "innodb_flush_log_at_trx_commit=2", "sync_binlog=0",
    ]
    if m.binlog:
        lines += ["log-bin=mysql-bin", "binlog_format=ROW", "binlog_row_image=FULL",
                  "binlog_row_metadata=FULL", f"gtid_domain_id={m.server_id}",
                  "gtid_strict_mode=ON", "log_slave_updates=ON", "expire_logs_days=2"]
    return "\n".join(lines) + "\n"


def _client(m: MariaDB, sql: str) -> subprocess.CompletedProcess:
    return subprocess.run([_which("mariadb") or "mariadb", "--no-defaults", f"--socket={m.socket}",
                           "-uroot", "-N", "-e", sql], capture_output=True, text=True, timeout=30)


def mariadb_ready(m: MariaDB) -> bool:
    return _port_open(m.port) and _client(m, "SELECT 1").returncode == 0


def start_mariadb(m: MariaDB) -> None:
    m.dir.mkdir(parents=True, exist_ok=True)
    cnf = m.dir / "my.cnf"
    cnf.write_text(_cnf(m))
    if _pid_alive(m.pidfile):
        _wait(f"MariaDB {m.name} on port {m.port}", lambda: mariadb_ready(m), 60, m.dir / "error.log")
        return
    if _port_open(m.port):
        raise ServiceError(f"port {m.port} ({m.name}) is taken by a process that is not ours")
    as_root = ["--user=root"] if os.geteuid() == 0 else []
    if not (m.dir / "data" / "mysql").exists():
        r = subprocess.run([_which("mariadb-install-db") or "mariadb-install-db",
                            f"--defaults-file={cnf}", *as_root, "--skip-test-db",
                            "--auth-root-authentication-method=normal"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise ServiceError(f"mariadb-install-db for {m.name} failed: {r.stderr[-2000:]}")
    logf = m.dir / "error.log"
    with open(m.dir / "stdout.log", "ab") as out:
        subprocess.Popen([_which("mariadbd") or "mariadbd", f"--defaults-file={cnf}", *as_root],
                         stdout=out, stderr=out, stdin=subprocess.DEVNULL, start_new_session=True)
    _wait(f"MariaDB {m.name} on port {m.port}", lambda: mariadb_ready(m), 60, logf)
    r = _client(m, f"CREATE USER IF NOT EXISTS '{USER}'@'{HOST}' IDENTIFIED BY '{PASSWORD}';"
                   f"GRANT ALL PRIVILEGES ON *.* TO '{USER}'@'{HOST}' WITH GRANT OPTION;")
    if r.returncode != 0:
        raise ServiceError(f"creating user on {m.name} failed: {r.stderr}")


def _stop_pid(what: str, pidfile: Path, timeout: float = 30) -> None:
    pid = _pid_alive(pidfile)
    if not pid:
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _pid_alive(pidfile):
        time.sleep(0.2)
    if _pid_alive(pidfile):
        log(f"{what} did not stop in {timeout:.0f}s; killing")
        os.kill(pid, signal.SIGKILL)
    pidfile.unlink(missing_ok=True)


# ---------------------------------------------------------------- MySQL (chroot)
_MOUNTS = ("proc", "sys", "dev")


DEFAULT_MIRROR = "http://deb.debian.org/debian"


def apt_mirrors(files: list[Path] | None = None) -> list[str]:
    """The Debian archive URIs the host's apt uses, in file order, without duplicates: the only
    network this machine may have.  Both shapes apt reads are parsed as apt parses them:
    one-line ``deb [opts] URI suite comp...`` files (``*.list``) and deb822 stanzas
    (``*.sources``, ``URIs:`` fields).  Comment lines are skipped (a deb822 file often names an
    unreachable snapshot archive in a ``#`` line), as are ``deb-src`` entries, disabled stanzas
    (``Enabled: no``), security and non-Debian archives (debootstrap needs the main archive)."""
    if files is None:
        d = Path("/etc/apt/sources.list.d")
        files = [Path("/etc/apt/sources.list"), *sorted(d.glob("*.list")), *sorted(d.glob("*.sources"))]
    found: list[str] = []
    for f in files:
        try:
            text = f.read_text(errors="replace")
        except OSError:
            continue
        found += _deb822_uris(text) if f.suffix == ".sources" else _one_line_uris(text)
    out: list[str] = []
    for uri in found:
        uri = uri.rstrip("/")
        if uri not in out and "security" not in uri and "/debian" in uri:
            out.append(uri)
    return out


def _one_line_uris(text: str) -> list[str]:
    uris = []
    for line in text.splitlines():
        words = line.split("#", 1)[0].split()
        if not words or words[0] != "deb":
            continue
        words = words[1:]
        if words and words[0].startswith("["):      # options: [arch=amd64 signed-by=...]
            while words and not words[0].endswith("]"):
                words = words[1:]
            words = words[1:]
        if words:
            uris.append(words[0])
    return uris


def _deb822_uris(text: str) -> list[str]:
    uris = []
    for stanza in _deb822_stanzas(text):
        types = stanza.get("types", "deb").split()
        if "deb" in types and stanza.get("enabled", "yes").lower() != "no":
            uris += stanza.get("uris", "").split()
    return uris


def _deb822_stanzas(text: str) -> list[dict[str, str]]:
    stanzas: list[dict[str, str]] = []
    cur: dict[str, str] = {}
    key = None
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        if not line.strip():
            if cur:
                stanzas.append(cur)
            cur, key = {}, None
        elif line[0] in " \t" and key:                # a continuation line of the field above
            cur[key] += " " + line.strip()
        elif ":" in line:
            key, value = line.split(":", 1)
            key = key.strip().lower()
            cur[key] = value.strip()
    if cur:
        stanzas.append(cur)
    return stanzas


def _debootstrap() -> None:
    """debootstrap from each mirror apt uses in turn (then Debian's default name): one mirror
    that cannot be reached does not fail the set-up while another can."""
    mirrors = apt_mirrors() or [DEFAULT_MIRROR]
    if DEFAULT_MIRROR not in mirrors:
        mirrors.append(DEFAULT_MIRROR)
    errors = []
    for mirror in mirrors:
        shutil.rmtree(MYSQL_ROOT, ignore_errors=True)
        MYSQL_ROOT.parent.mkdir(parents=True, exist_ok=True)
        try:
            _run(["debootstrap", "--variant=minbase", MYSQL_SUITE, str(MYSQL_ROOT), mirror],
                 f"debootstrap from {mirror}")
            return
        except (ServiceError, subprocess.TimeoutExpired) as e:
            log(f"debootstrap from {mirror} failed; trying the next mirror")
            errors.append(str(e)[-400:])
    raise ServiceError(
        f"making the MySQL chroot at {MYSQL_ROOT} failed from every mirror apt uses ({', '.join(mirrors)}); "
        "check that `apt-get update` works on this machine and that one of its sources serves "
        f"Debian {MYSQL_SUITE}. "
        "Last errors: " + " | ".join(errors))


def _run(cmd: list[str], what: str, timeout: float = 1800) -> None:
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                       env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    if r.returncode != 0:
        raise ServiceError(f"{what} failed ({' '.join(cmd)}): {(r.stderr or r.stdout).strip()[-2000:]}")


def _chroot(*args: str) -> list[str]:
    return ["chroot", str(MYSQL_ROOT), *args]


def ensure_mysql_root() -> None:
    """Make the chroot with MySQL once (idempotent: a marker file says it is complete) and
    mount /proc, /sys and /dev into it (again after a reboot)."""
    marker = MYSQL_ROOT / ".shardmerge-mysql-ready"
    if os.geteuid() != 0:
        if marker.exists():
            return _mount_chroot()
        raise ServiceError(f"the MySQL chroot {MYSQL_ROOT} does not exist and making it needs root "
                           "(debootstrap, chroot); run scripts/bootstrap as root once")
    if not marker.exists():
        if not _which("debootstrap"):
            _run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", "debootstrap"], "installing debootstrap")
        if not (MYSQL_ROOT / "usr" / "bin" / "apt-get").exists():
            log(f"making the MySQL chroot at {MYSQL_ROOT} (debootstrap {MYSQL_SUITE}, once per machine, ~3 min)")
            _debootstrap()
        _mount_chroot()
        shutil.copy("/etc/resolv.conf", MYSQL_ROOT / "etc" / "resolv.conf")
        log("installing mysql-server-core and mysql-client in the chroot")
        _run(_chroot("apt-get", "-o", "Acquire::Check-Valid-Until=false", "update", "-qq"), "apt-get update in the chroot")
        _run(_chroot("apt-get", "install", "-y", "-qq", "--no-install-recommends", "mysql-server-core", "mysql-client"),
             "installing MySQL in the chroot")
        marker.write_text(subprocess.run(_chroot("mysqld", "--version"), capture_output=True, text=True).stdout)
    _mount_chroot()


def _mount_chroot() -> None:
    for d in _MOUNTS:
        target = MYSQL_ROOT / d
        if subprocess.run(["mountpoint", "-q", str(target)]).returncode != 0:
            target.mkdir(exist_ok=True)
            _run(["mount", "--bind", f"/{d}", str(target)], f"mounting /{d} into the MySQL chroot")


def _mysql_args(m: MySQL) -> list[str]:
    args = [f"--datadir={m.inner}/data", f"--port={m.port}", f"--bind-address={HOST}",
            f"--socket={m.inner}/mysqld.sock", f"--pid-file={m.inner}/mysqld.pid",
            f"--log-error={m.inner}/error.log", "--mysqlx=OFF", "--secure-file-priv=",
            f"--server-id={m.server_id}", "--skip-name-resolve", "--max-connections=400",
            "--innodb-buffer-pool-size=96M", "--innodb-redo-log-capacity=128M",
            # dev speed, as for MariaDB: a killed mysqld still loses nothing committed
            "--innodb-flush-log-at-trx-commit=2", "--sync-binlog=0", "--performance-schema-max-table-instances=400"]
    if m.binlog:
        args += ["--log-bin=mysql-bin", "--binlog-format=ROW", "--binlog-row-image=FULL",
                 "--binlog-row-metadata=FULL", "--gtid-mode=ON", "--enforce-gtid-consistency=ON",
                 "--binlog-expire-logs-seconds=172800"]
    else:
        args += ["--skip-log-bin"]
    return args


def _mysql_client(m: MySQL, sql: str) -> subprocess.CompletedProcess:
    return subprocess.run(_chroot("mysql", "--no-defaults", f"--socket={m.inner}/mysqld.sock", "-uroot", "-N",
                                  "-e", sql), capture_output=True, text=True, timeout=30)


def mysql_ready(m: MySQL) -> bool:
    return _port_open(m.port) and _mysql_client(m, "SELECT 1").returncode == 0


def start_mysql(m: MySQL) -> None:
    m.dir.mkdir(parents=True, exist_ok=True)
    if _pid_alive(m.pidfile):
        _wait(f"MySQL {m.name} on port {m.port}", lambda: mysql_ready(m), 90, m.dir / "error.log")
        return
    if _port_open(m.port):
        raise ServiceError(f"port {m.port} ({m.name}) is taken by a process that is not ours")
    if not (m.dir / "data" / "mysql").exists():
        shutil.rmtree(m.dir / "data", ignore_errors=True)
        r = subprocess.run(_chroot("mysqld", "--no-defaults", "--initialize-insecure", "--user=root",
                                   f"--datadir={m.inner}/data"), capture_output=True, text=True)
        if r.returncode != 0:
            raise ServiceError(f"mysqld --initialize for {m.name} failed: {r.stderr[-2000:]}")
    with open(m.dir / "stdout.log", "ab") as out:
        subprocess.Popen(_chroot("mysqld", "--no-defaults", "--user=root", *_mysql_args(m)),
                         stdout=out, stderr=out, stdin=subprocess.DEVNULL, start_new_session=True)
    _wait(f"MySQL {m.name} on port {m.port}", lambda: mysql_ready(m), 90, m.dir / "error.log")
    r = _mysql_client(m, f"CREATE USER IF NOT EXISTS '{USER}'@'{HOST}' IDENTIFIED BY '{PASSWORD}';"
                         f"GRANT ALL PRIVILEGES ON *.* TO '{USER}'@'{HOST}' WITH GRANT OPTION;")
    if r.returncode != 0:
        raise ServiceError(f"creating user on {m.name} failed: {r.stderr}")


def _with_mysql() -> bool:
    """MySQL servers are part of the set unless SHARDMERGE_SERVICES_MYSQL=0 (private sets of
    the chaos harness, helpers that need MariaDB only)."""
    return os.environ.get("SHARDMERGE_SERVICES_MYSQL", "1") != "0"


# ---------------------------------------------------------------- commands
def addresses() -> dict:
    """The endpoints tests, examples and the quick start connect to."""
    return {
        "etcd": f"{HOST}:{ETCD_CLIENT_PORT}",
        "mysql": {m.name: {"host": HOST, "port": m.port, "user": USER, "password": PASSWORD}
                  for m in (*MARIADBS, *(MYSQLS if _with_mysql() else ()))},
        "dir": str(STATE),
    }


def status() -> dict:
    up = {"etcd": etcd_healthy()}
    up.update({m.name: mariadb_ready(m) for m in MARIADBS})
    if _with_mysql():
        up.update({m.name: mysql_ready(m) for m in MYSQLS})
    return up


def start() -> dict:
    install_missing()
    reserve_ports()
    STATE.mkdir(parents=True, exist_ok=True)
    start_etcd()
    for m in MARIADBS:
        start_mariadb(m)
    if _with_mysql():
        ensure_mysql_root()
        for my in MYSQLS:
            start_mysql(my)
    info = addresses()
    (STATE / "addresses.json").write_text(json.dumps(info, indent=2))
    return info


def stop() -> None:
    for m in MARIADBS:
        _stop_pid(f"MariaDB {m.name}", m.pidfile)
    for my in MYSQLS:
        _stop_pid(f"MySQL {my.name}", my.pidfile)
    _stop_pid("etcd", _etcd_dir() / "etcd.pid")


def reset() -> None:
    stop()
    shutil.rmtree(STATE, ignore_errors=True)
    for my in MYSQLS:
        shutil.rmtree(my.dir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="scripts/services", description=__doc__.split("\n")[0])
    ap.add_argument("command", choices=["start", "stop", "status", "reset", "env"])
    ap.add_argument("--json", action="store_true", help="machine-readable output")
    a = ap.parse_args(argv)
    try:
        if a.command == "start":
            info = start()
            print(json.dumps(info, indent=2) if a.json else _describe(info, status()))
        elif a.command == "stop":
            stop()
            log("stopped")
        elif a.command == "reset":
            reset()
            log(f"stopped and removed {STATE}")
        elif a.command == "env":
            info = addresses()
            print(f"export SHARDMERGE_ETCD={info['etcd']}")
            for name, p in info["mysql"].items():
                print(f"export SHARDMERGE_{name.upper()}={p['host']}:{p['port']}")
        else:
            st = status()
            print(json.dumps({"up": st, **addresses()}, indent=2) if a.json
                  else _describe(addresses(), st))
            return 0 if all(st.values()) else 3
    except ServiceError as e:
        print(f"[services] error: {e}", file=sys.stderr)
        return 2
    return 0


def _describe(info: dict, st: dict) -> str:
    rows = [f"etcd        {info['etcd']:<18} {'up' if st['etcd'] else 'DOWN'}"]
    for name, p in info["mysql"].items():
        rows.append(f"{name:<11} {p['host']}:{p['port']:<8} {'up' if st[name] else 'DOWN'}"
                    f"   user={p['user']} password={p['password']}")
    return "\n".join(rows) + f"\ndata under {info['dir']}"


if __name__ == "__main__":
    sys.exit(main())
