"""A MySQL server private to one test module, run from the services' chroot the way
scripts/devservices.py runs the shared ones: for settings that cannot be flipped on a shared
server without disturbing other tests (``gtid_mode``, purged binlogs).  Stopped and its data
removed when the block ends."""
from __future__ import annotations

import contextlib
import shutil
import uuid

from tests.support.ports import free_port


@contextlib.contextmanager
def private_mysql(devservices, *, binlog: bool = True, server_id: int = 0):
    """Yields connection params (the services' user) of a fresh MySQL server on a free port."""
    port = free_port()
    m = devservices.MySQL(f"private-{uuid.uuid4().hex[:6]}", port, server_id or 900 + port % 100, binlog)
    devservices.ensure_mysql_root()
    try:
        devservices.start_mysql(m)
        yield {"host": devservices.HOST, "port": port, "user": devservices.USER, "password": devservices.PASSWORD}
    finally:
        devservices._stop_pid(f"private MySQL on {port}", m.pidfile)
        shutil.rmtree(m.dir, ignore_errors=True)

