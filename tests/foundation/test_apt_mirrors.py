"""scripts/devservices.py reads the Debian mirror for the MySQL chroot from the host's apt
sources, in every shape apt itself reads: the chroot is made from it on a new machine."""
from pathlib import Path

from tests.conftest import devservices

DEB822_WITH_COMMENTED_SNAPSHOT = """\
Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
# http://snapshot.debian.org/archive/debian-security/20250520T000000Z
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""

DEB822_SEVERAL = """\
# a disabled stanza comes first
Types: deb deb-src
URIs: http://unreachable.example/debian
Enabled: no
Suites: bookworm

Types: deb-src
URIs: http://src-only.example/debian
Suites: bookworm

Types: deb
URIs: http://mirror-a.example/debian/
 http://mirror-b.example/debian
Suites: bookworm
Components: main
Signed-By:
 -----BEGIN PGP PUBLIC KEY BLOCK-----
 .
 mQINBF...
"""

ONE_LINE = """\
# deb http://commented.example/debian bookworm main
deb-src http://src.example/debian bookworm main
deb [arch=amd64 signed-by=/usr/share/keyrings/debian.gpg] http://mirror-c.example/debian bookworm main  # trailing
deb http://security.debian.org/debian-security bookworm-security main
deb https://packages.cloud.google.com/apt cloud-sdk-bookworm main
deb http://mirror-a.example/debian bookworm-updates main
"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_deb822_comment_lines_are_not_mirrors(tmp_path):
    f = _write(tmp_path, "debian.sources", DEB822_WITH_COMMENTED_SNAPSHOT)
    assert devservices.apt_mirrors([f]) == ["http://deb.debian.org/debian"]


def test_deb822_disabled_source_only_and_continuation_lines(tmp_path):
    f = _write(tmp_path, "mirrors.sources", DEB822_SEVERAL)
    assert devservices.apt_mirrors([f]) == ["http://mirror-a.example/debian", "http://mirror-b.example/debian"]


def test_one_line_options_comments_security_and_foreign_archives(tmp_path):
    f = _write(tmp_path, "sources.list", ONE_LINE)
    assert devservices.apt_mirrors([f]) == ["http://mirror-c.example/debian", "http://mirror-a.example/debian"]


def test_both_shapes_together_in_file_order_without_duplicates(tmp_path):
    files = [_write(tmp_path, "sources.list", ONE_LINE), tmp_path / "missing.list",
             _write(tmp_path, "mirrors.sources", DEB822_SEVERAL)]
    assert devservices.apt_mirrors(files) == ["http://mirror-c.example/debian", "http://mirror-a.example/debian",
                                              "http://mirror-b.example/debian"]


def test_this_machines_sources_give_a_mirror_debootstrap_can_use():
    mirrors = devservices.apt_mirrors()
    assert mirrors, "no Debian mirror found in /etc/apt"
    assert all(m.startswith(("http://", "https://")) and "snapshot" not in m for m in mirrors), mirrors


def test_debootstrap_tries_the_next_mirror_and_names_them_all_when_none_works(tmp_path, monkeypatch):
    """The fallback itself, with debootstrap replaced by a recorder (the real one needs the
    network and minutes; the quick start runs it)."""
    tried = []

    def fake_run(cmd, what, timeout=1800):
        tried.append(cmd[-1])
        if cmd[-1] != "http://mirror-b.example/debian":
            raise devservices.ServiceError(f"{what} failed: cannot reach")

    monkeypatch.setattr(devservices, "MYSQL_ROOT", tmp_path / "root")
    monkeypatch.setattr(devservices, "_run", fake_run)
    monkeypatch.setattr(devservices, "apt_mirrors",
                        lambda: ["http://mirror-a.example/debian", "http://mirror-b.example/debian"])
    devservices._debootstrap()
    assert tried == ["http://mirror-a.example/debian", "http://mirror-b.example/debian"]

    tried.clear()
    monkeypatch.setattr(devservices, "apt_mirrors", lambda: ["http://mirror-a.example/debian"])
    try:
        devservices._debootstrap()
    except devservices.ServiceError as e:
        assert "mirror-a.example" in str(e) and devservices.DEFAULT_MIRROR in str(e) and "apt-get update" in str(e)
    else:
        raise AssertionError("no error when every mirror failed")
    assert tried == ["http://mirror-a.example/debian", devservices.DEFAULT_MIRROR]
