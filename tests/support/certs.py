"""Test certificates made with the ``openssl`` CLI: a CA, certificates it signs (any CN; SAN
127.0.0.1 and localhost so a server certificate fits a loopback master), and a second,
unrelated CA for the "wrong CA" cases."""
from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


def _openssl(*args: str, cwd: Path) -> None:
    r = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True)
    assert r.returncode == 0, f"openssl {' '.join(args)}: {r.stderr}"


@dataclass(frozen=True)
class Pair:
    cert: str
    key: str


class CA:
    def __init__(self, folder: Path, name: str = "sm-test-ca"):
        self.dir = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.name = name
        self.cert = str(folder / f"{name}.crt")
        self.key = str(folder / f"{name}.key")
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={name}",
                 "-keyout", self.key, "-out", self.cert, cwd=folder)

    def issue(self, cn: str, sans: str = "IP:127.0.0.1,DNS:localhost") -> Pair:
        """A certificate for ``cn`` usable as server and as client certificate."""
        stem = self.dir / f"{self.name}-{cn}-{abs(hash(sans)) % 10000}"
        ext = self.dir / f"{stem.name}.ext"
        ext.write_text(f"subjectAltName={sans}\n"
                       "extendedKeyUsage=serverAuth,clientAuth\n")
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={cn}", "-keyout", f"{stem}.key",
                 "-out", f"{stem}.csr", cwd=self.dir)
        _openssl("x509", "-req", "-in", f"{stem}.csr", "-CA", self.cert, "-CAkey", self.key, "-CAcreateserial",
                 "-days", "2", "-extfile", str(ext), "-out", f"{stem}.crt", cwd=self.dir)
        return Pair(f"{stem}.crt", f"{stem}.key")
