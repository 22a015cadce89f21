"""A real MediaWiki for tests: Debian's ``mediawiki`` package, a SQLite database, PHP's built-in server.

:func:`ensure_mediawiki` makes sure the packages are there (installing them with ``apt-get`` when
missing and possible; under CI, where ``.ci/run`` installs them first, a missing MediaWiki fails
loudly instead of skipping). :class:`MediaWikiServer` installs a private wiki into a temporary
folder without touching ``/etc``: ``MW_CONFIG_FILE`` points MediaWiki at the folder's
``LocalSettings.php``; ``maintenance/install.php`` creates it with ``--dbtype sqlite``; pages come
from an XML dump through ``importDump.php`` followed by ``rebuildrecentchanges.php`` (an import
writes no recent changes); ``php -S 127.0.0.1:PORT -t /usr/share/mediawiki`` serves it, started in
a process group of its own and stopped as a group (PHP's server workers outlive a killed parent).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from xml.sax.saxutils import escape

import httpx
import pytest

MW_ROOT = Path("/usr/share/mediawiki")
#: python3-pygments: the SyntaxHighlight extension (bundled with MediaWiki) runs /usr/bin/pygmentize.
APT_PACKAGES = ["mediawiki", "php-sqlite3", "php-cli", "python3-pygments"]
BOT_USER = "SyncBot"
BOT_APP = "chatops"
#: Bot passwords are 32 characters of 0-9a-w (what Special:BotPasswords generates).
BOT_PASSWORD = "0123456789abcdefghijklmnopqrstuw"


def _installed() -> str | None:
    """``None`` when MediaWiki, PHP and PHP's SQLite driver are present, else what is missing."""
    if not (MW_ROOT / "maintenance" / "install.php").is_file():
        return "mediawiki (no /usr/share/mediawiki/maintenance/install.php)"
    if shutil.which("php") is None:
        return "php-cli (no php on PATH)"
    mods = subprocess.run(["php", "-m"], capture_output=True, text=True, timeout=60).stdout.lower()
    if "pdo_sqlite" not in mods:
        return "php-sqlite3 (PHP has no pdo_sqlite)"
    if not Path("/usr/bin/pygmentize").is_file():
        return "python3-pygments (no /usr/bin/pygmentize for syntax highlighting)"
    return None


def ensure_mediawiki() -> None:
    """Make MediaWiki available, or skip (fail under ``CI=true``) with the reason.

    Installs ``mediawiki php-sqlite3 php-cli`` with ``apt-get`` (about 45 s) when missing and this
    process is root with apt; never under CI, where ``.ci/run`` must have installed them.
    """
    missing = _installed()
    if missing is None:
        return
    install = f"apt-get update && apt-get install -y --no-install-recommends {' '.join(APT_PACKAGES)}"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"MediaWiki is required under CI but missing: {missing}; .ci/run should run `{install}`",
                    pytrace=False)
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        pytest.skip(f"MediaWiki tests need {missing}; install it with `{install}` (needs root and apt)")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    try:
        for cmd in (["apt-get", "update", "-q"],
                    ["apt-get", "install", "-y", "-q", "--no-install-recommends", *APT_PACKAGES]):
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
            if proc.returncode != 0:
                pytest.skip(f"cannot install MediaWiki ({' '.join(cmd)} exited {proc.returncode}: "
                            f"{(proc.stderr or proc.stdout)[-400:]})")
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"cannot install MediaWiki: {exc}")
    missing = _installed()
    if missing is not None:
        pytest.skip(f"MediaWiki still incomplete after apt-get install: {missing}")


def free_port() -> int:
    """A TCP port that was free a moment ago on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def page_xml(title: str, text: str, ns: int = 0, timestamp: str = "2026-01-05T10:00:00Z") -> str:
    """One ``<page>`` of a MediaWiki XML export (schema 0.11)."""
    return (f"<page><title>{escape(title)}</title><ns>{ns}</ns><revision><timestamp>{timestamp}</timestamp>"
            f"<contributor><username>Admin</username></contributor><model>wikitext</model>"
            f"<format>text/x-wiki</format><text xml:space=\"preserve\">{escape(text)}</text></revision></page>")


def dump_xml(pages: list[str]) -> str:
    """A whole export file around ``page_xml`` items."""
    return ('<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.11/" version="0.11" xml:lang="en">'
            + "".join(pages) + "</mediawiki>")


class MediaWikiServer:
    """A private wiki under ``root`` served on ``127.0.0.1:port`` (see the module docstring).

    Attributes:
        api_url: ``http://127.0.0.1:PORT/api.php``.
        bot_user, bot_password: the bot password to log in with (``SyncBot@chatops``).
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = free_port()
        self.server_url = f"http://127.0.0.1:{self.port}"
        self.api_url = f"{self.server_url}/api.php"
        self.bot_user = f"{BOT_USER}@{BOT_APP}"
        self.bot_password = BOT_PASSWORD
        self.env = dict(os.environ, MW_CONFIG_FILE=str(root / "LocalSettings.php"))
        self.proc: subprocess.Popen[bytes] | None = None

    def php(self, script: str, *args: str, stdin: str | None = None, timeout: float = 120) -> str:
        """Run ``maintenance/SCRIPT`` against this wiki; returns stdout.

        Raises:
            RuntimeError: when the script fails (with its output).
        """
        proc = subprocess.run(["php", str(MW_ROOT / "maintenance" / script), *args], input=stdin,
                              capture_output=True, text=True, timeout=timeout, env=self.env, cwd=self.root)
        if proc.returncode != 0:
            raise RuntimeError(f"{script} {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
        return proc.stdout

    def install(self, pages_xml: str) -> None:
        """Create the wiki: install, make it private, add the bot, import ``pages_xml``, rebuild recent changes."""
        self.root.mkdir(parents=True, exist_ok=True)
        self.php("install.php", "--dbtype", "sqlite", "--dbpath", str(self.root / "data"),
                 "--server", self.server_url, "--scriptpath", "", "--confpath", str(self.root),
                 "--pass", "Admin-Passw0rd-for-tests", "--lang", "en", "Chatops Test Wiki", "Admin")
        with open(self.root / "LocalSettings.php", "a", encoding="utf-8") as f:
            f.write("\n# chatops tests: a private wiki, syntax highlighting and footnotes\n"
                    "$wgGroupPermissions['*']['read'] = false;\n"
                    "$wgGroupPermissions['*']['edit'] = false;\n"
                    "$wgGroupPermissions['*']['createaccount'] = false;\n"
                    "$wgEnableBotPasswords = true;\n"
                    "$wgJobRunRate = 0;\n"
                    "wfLoadExtension( 'SyntaxHighlight_GeSHi' );\n"
                    "wfLoadExtension( 'Cite' );\n")
        self.php("createAndPromote.php", "--bot", BOT_USER, "SyncBot-Passw0rd-for-tests")
        self.php("createBotPassword.php", "--appid", BOT_APP, "--grants", "basic,highvolume", BOT_USER, BOT_PASSWORD)
        self.delete("Main Page")  # the installer's page: tests start from their own pages only
        self.import_pages(pages_xml)

    def import_pages(self, pages_xml: str, rebuild_rc: bool = True) -> None:
        """Import an XML dump (``importDump.php``), then ``rebuildrecentchanges.php`` unless told not to."""
        path = self.root / f"import-{time.monotonic_ns()}.xml"
        path.write_text(pages_xml, encoding="utf-8")
        self.php("importDump.php", str(path))
        if rebuild_rc:
            self.php("rebuildrecentchanges.php")

    def edit(self, title: str, text: str, summary: str = "edit") -> None:
        """Save a new revision of ``title`` (creates the page when missing)."""
        self.php("edit.php", "--user", "Admin", "--summary", summary, title, stdin=text)

    def delete(self, title: str) -> None:
        """Delete a page (``deleteBatch.php``)."""
        listing = self.root / f"delete-{time.monotonic_ns()}.txt"
        listing.write_text(title + "\n", encoding="utf-8")
        self.php("deleteBatch.php", "-u", "Admin", "-r", "obsolete", str(listing))

    def move(self, old: str, new: str) -> None:
        """Move (rename) a page, leaving a redirect (``moveBatch.php``)."""
        listing = self.root / f"move-{time.monotonic_ns()}.txt"
        listing.write_text(f"{old}|{new}\n", encoding="utf-8")
        self.php("moveBatch.php", "-u", "Admin", "-r", "renamed", str(listing))

    def start(self) -> None:
        """Serve the wiki with ``php -S`` in its own process group; waits until the API answers."""
        log = open(self.root / "php-server.log", "wb")
        self.proc = subprocess.Popen(["php", "-S", f"127.0.0.1:{self.port}", "-t", str(MW_ROOT)], cwd=self.root,
                                     env=dict(self.env, PHP_CLI_SERVER_WORKERS="2"), stdout=log, stderr=log,
                                     start_new_session=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"php -S exited {self.proc.returncode}: "
                                   f"{(self.root / 'php-server.log').read_text(errors='replace')[-500:]}")
            try:
                r = httpx.get(self.api_url, params={"action": "query", "meta": "siteinfo", "format": "json"}, timeout=5)
                if r.status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"MediaWiki did not answer on {self.api_url} within 30 s")

    def stop(self) -> None:
        """Stop the server's whole process group (SIGTERM, then SIGKILL after 5 s)."""
        if self.proc is None:
            return
        try:
            pgid = os.getpgid(self.proc.pid)
        except ProcessLookupError:
            pgid = None
        if pgid is not None:
            try:
                os.killpg(pgid, signal.SIGTERM)
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(pgid, signal.SIGKILL)
                self.proc.wait(timeout=5)
            except ProcessLookupError:
                pass
            # Workers of PHP's server may outlive the parent: make sure the group is gone.
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc = None
