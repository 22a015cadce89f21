"""The Teams app package: ``bot/teams/manifest/manifest.json`` filled from the settings and zipped with the icons.

    make teams-package                     # or: python -m bot.teams.package [--out PATH]

The template's placeholders are filled from :class:`app.settings.Settings`: ``{{MICROSOFT_APP_ID}}``
(``MicrosoftAppId``, a GUID: the app id and the bot id), ``{{BOT_HOST}}`` (``TEAMS_BOT_DOMAIN``, a host
name: ``validDomains`` and the developer links), ``{{BOT_NAME}}`` (``TEAMS_APP_NAME``, at most 30
characters), ``{{DEVELOPER_NAME}}`` (``TEAMS_DEVELOPER_NAME``, default the app name), ``{{PRIVACY_URL}}`` and
``{{TERMS_URL}}`` (``PRIVACY_URL`` / ``TERMS_URL``, default the pages ``chatops serve`` serves at
``https://TEAMS_BOT_DOMAIN/privacy`` and ``/terms``, see :mod:`bot.legal`) and ``{{VERSION}}``
(this package's version, so an upgrade of the bot is an upgrade of the app). The zip holds
``manifest.json``, ``color.png`` and ``outline.png`` at its root, as Teams' "Upload an app" expects.

A missing or malformed setting raises :class:`PackageError` with what to set; ``main`` prints it and
exits 2 (no traceback).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import zipfile
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = ["PackageError", "TEMPLATE_DIR", "fill_manifest", "build_package", "main"]

#: The manifest template and the icons: package data of this adapter (``pyproject.toml``), so an installed
#: chatops (the Docker image too) builds the package, not only a checkout.
TEMPLATE_DIR = Path(__file__).resolve().parent / "manifest"
_GUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_HOST = re.compile(r"^(?=.{1,253}$)(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?\.)+[a-zA-Z]{2,63}$")
_PLACEHOLDER = re.compile(r"\{\{[A-Z_]+\}\}")
_FILES = ("manifest.json", "color.png", "outline.png")


class PackageError(ValueError):
    """A setting the package needs is missing or malformed (the message says which and what to set)."""


def _version() -> str:
    try:
        version = metadata.version("chatops-bot")
    except metadata.PackageNotFoundError:
        version = "0.0.0"
    core = re.match(r"^(\d+)\.(\d+)\.(\d+)", version)
    return ".".join(str(int(x)) for x in core.groups()) if core else "0.0.0"


def fill_manifest(template: dict[str, Any], *, app_id: str, domain: str, name: str, developer: str = "",
                  version: str | None = None, privacy_url: str | None = None,
                  terms_url: str | None = None) -> dict[str, Any]:
    """The manifest with every ``{{PLACEHOLDER}}`` replaced (see the module docstring); ``privacy_url`` and
    ``terms_url`` default to ``https://<domain>/privacy`` and ``/terms``.

    Raises:
        PackageError: the app id is not a GUID, the domain is not a bare host name, the name is empty or
            longer than 30 characters, or the template has a placeholder this function does not know.
    """
    app_id, domain, name = app_id.strip(), domain.strip().lower(), name.strip()
    if not _GUID.match(app_id):
        raise PackageError("MicrosoftAppId must be the Azure Bot's app (client) id, a GUID such as "
                           f"00000000-0000-0000-0000-000000000000; got {app_id[:40]!r}")
    if not _HOST.match(domain):
        raise PackageError("TEAMS_BOT_DOMAIN must be the host name the bot is served on, without https:// or a "
                           f"path (e.g. chatops.example.com); got {domain[:80]!r}")
    if not name or len(name) > 30:
        raise PackageError(f"TEAMS_APP_NAME must have 1 to 30 characters (Teams' limit); got {name[:40]!r}")
    values = {"{{MICROSOFT_APP_ID}}": app_id, "{{BOT_HOST}}": domain, "{{BOT_NAME}}": name,
              "{{DEVELOPER_NAME}}": developer.strip() or name, "{{VERSION}}": version or _version(),
              "{{PRIVACY_URL}}": privacy_url or f"https://{domain}/privacy",
              "{{TERMS_URL}}": terms_url or f"https://{domain}/terms"}

    def fill(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: fill(v) for k, v in node.items()}
        if isinstance(node, list):
            return [fill(v) for v in node]
        if isinstance(node, str):
            for key, value in values.items():
                node = node.replace(key, value)
            left = _PLACEHOLDER.search(node)
            if left:
                raise PackageError(f"the manifest template has a placeholder nobody fills: {left.group(0)}")
        return node

    return fill(template)


def build_package(settings, out: Path, template_dir: Path = TEMPLATE_DIR) -> Path:
    """Write the app package for ``settings`` (:class:`app.settings.Settings`) to ``out``; returns ``out``.

    Raises:
        PackageError: a setting is missing or malformed, or the template or an icon is missing.
    """
    for name in _FILES:
        if not (template_dir / name).is_file():
            raise PackageError(f"{template_dir / name} is missing: reinstall chatops (bot/teams/manifest/ holds "
                               "the manifest template and the icons)")
    template = json.loads((template_dir / "manifest.json").read_text(encoding="utf-8"))
    manifest = fill_manifest(template, app_id=settings.microsoft_app_id, domain=settings.teams_bot_domain,
                             name=settings.teams_app_name, developer=settings.teams_developer_name,
                             privacy_url=settings.privacy_url, terms_url=settings.terms_url)
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("manifest.json", json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
        for name in _FILES[1:]:
            zf.write(template_dir / name, arcname=name)
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m bot.teams.package [--out PATH]``: build the package from the environment's settings."""
    parser = argparse.ArgumentParser(prog="python -m bot.teams.package", description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("dist/chatops-teams.zip"),
                        help="where to write the zip (default: dist/chatops-teams.zip)")
    args = parser.parse_args(argv)
    from app.settings import Settings

    try:
        path = build_package(Settings(), args.out)
    except PackageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {path}: upload it in Teams (Apps > Manage your apps > Upload an app) or the Teams admin center")
    return 0


if __name__ == "__main__":
    sys.exit(main())
