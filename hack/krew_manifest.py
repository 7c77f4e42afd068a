"""Write the released krew manifest of `kubectl lws` from plugins/lws.yaml and the built archives.

    python hack/krew_manifest.py --base-url URL --homepage URL ARCHIVES_DIR > lws.yaml

plugins/lws.yaml names each platform's archive in ``uri`` and leaves ``sha256`` empty: a
release builds the archives (docs/plugin.md, "krew"), and this script sets each ``uri`` to
``URL/<archive>`` and ``sha256`` to the archive's digest, then checks the result as krew's
own manifest validation does (``validate``) and refuses to print one that fails.

``validate`` holds krew's rules, from its ``internal/index/validation/validate.go``
(``ValidatePlugin``, ``validatePlatform``, ``validateSelector``) and
``cmd/validate-krew-manifest`` (every platform selects a platform krew runs on, no two select the
same one): the tests check plugins/lws.yaml with it.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import re
import sys
from pathlib import Path
from typing import Any

import yaml

API_VERSION = "krew.googlecontainertools.github.com/v1alpha2"
TEMPLATE = Path(__file__).resolve().parents[1] / "plugins" / "lws.yaml"
# The (os, arch) pairs krew itself is released for, which a plugin's platforms select among.
KREW_PLATFORMS = (
    ("linux", "amd64"), ("linux", "arm64"), ("linux", "arm"), ("linux", "386"),
    ("darwin", "amd64"), ("darwin", "arm64"), ("windows", "amd64"), ("windows", "386"),
)
SAFE_NAME = re.compile(r"^[\w-]+$")
SHA256 = re.compile(r"^[a-f0-9]{64}$")
# krew parses the version as semantic versioning with the ``v`` prefix it requires.
SEMVER = re.compile(r"^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
                    r"(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$")
WINDOWS_RESERVED = {"CON", "PRN", "AUX", "NUL", *(f"COM{i}" for i in range(1, 10)),
                    *(f"LPT{i}" for i in range(1, 10))}


def _matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A Kubernetes label selector's verdict on ``labels`` (In, NotIn, Exists, DoesNotExist)."""
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        present = key in labels
        verdict = {"In": present and labels.get(key) in values,
                   "NotIn": not present or labels.get(key) not in values,
                   "Exists": present, "DoesNotExist": not present}.get(op, False)
        if not verdict:
            return False
    return True


def _selector_errors(selector: Any) -> list[str]:
    if not isinstance(selector, dict):
        return ["nil selector is not supported"]
    labels, exprs = selector.get("matchLabels"), selector.get("matchExpressions")
    if not labels and not exprs:
        return ["empty selector is not supported"]
    keys = [*(labels or {}), *(e.get("key") for e in exprs or [])]
    return [f"key {k!r} not supported" for k in keys if k not in ("os", "arch")]


def _platform_errors(platform: dict[str, Any], released: bool) -> list[str]:
    errors: list[str] = []
    if not platform.get("uri"):
        errors.append("`uri` has to be set")
    elif released and not str(platform["uri"]).startswith("https://"):
        errors.append(f"`uri` {platform['uri']!r} is not an https URL")
    if released and not SHA256.match(str(platform.get("sha256") or "")):
        errors.append(f"`sha256` {platform.get('sha256')!r} must match {SHA256.pattern}")
    if not platform.get("bin"):
        errors.append("`bin` has to be set")
    files = platform.get("files")
    if files is not None and (not files or any(not f.get("from") or not f.get("to")
                                               for f in files)):
        errors.append("`files` has to be unspecified, or each entry has `from` and `to`")
    errors.extend(_selector_errors(platform.get("selector")))
    return errors


def validate(manifest: dict[str, Any], name: str, released: bool = True) -> list[str]:
    """What krew would refuse in ``manifest``, the manifest file ``name``.yaml (empty: none).
    ``released=False`` accepts the repository's template: archive names and no digests."""
    errors: list[str] = []
    spec = manifest.get("spec") or {}
    if manifest.get("apiVersion") != API_VERSION:
        errors.append(f"apiVersion {manifest.get('apiVersion')!r} is not {API_VERSION}")
    if manifest.get("kind") != "Plugin":
        errors.append(f"kind {manifest.get('kind')!r} is not Plugin")
    if not SAFE_NAME.match(name) or name.upper() in WINDOWS_RESERVED:
        errors.append(f"the plugin name {name!r} is not allowed")
    if (manifest.get("metadata") or {}).get("name") != name:
        errors.append(f"metadata.name should be {name!r}, as the file is named")
    short = spec.get("shortDescription") or ""
    if not short or "\n" in short or "\r" in short:
        errors.append("shortDescription must be one line, not empty")
    if not spec.get("description"):
        errors.append("description must not be empty")
    if not SEMVER.match(str(spec.get("version") or "")):
        errors.append(f"version {spec.get('version')!r} is not v-prefixed semantic versioning")
    platforms = spec.get("platforms") or []
    if not platforms:
        errors.append("should have a platform specified")
    for i, platform in enumerate(platforms):
        errors.extend(f"platforms[{i}]: {e}" for e in _platform_errors(platform, released))
        selector = platform.get("selector") or {}
        chosen = [p for p in KREW_PLATFORMS
                  if _matches(selector, {"os": p[0], "arch": p[1]})]
        if not chosen:
            errors.append(f"platforms[{i}]: its selector matches no platform krew runs on")
        if any(os == "windows" for os, _ in chosen) and \
                not str(platform.get("bin", "")).endswith(".exe"):
            errors.append(f"platforms[{i}]: krew runs only .exe entry points on Windows")
    for os, arch in KREW_PLATFORMS:
        selecting = [i for i, p in enumerate(platforms)
                     if _matches(p.get("selector") or {}, {"os": os, "arch": arch})]
        if len(selecting) > 1:
            errors.append(f"platforms {selecting} overlap: each selects os={os}/arch={arch}")
    return errors


def fill(template: dict[str, Any], base_url: str, homepage: str,
         archives: Path) -> dict[str, Any]:
    """``template`` with each platform's archive URL and digest, and the homepage."""
    manifest = copy.deepcopy(template)
    manifest["spec"]["homepage"] = homepage
    for platform in manifest["spec"]["platforms"]:
        archive = archives / platform["uri"]
        platform["sha256"] = hashlib.sha256(archive.read_bytes()).hexdigest()
        platform["uri"] = f"{base_url.rstrip('/')}/{platform['uri']}"
    return manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("archives", type=Path, help="the directory holding the built archives")
    parser.add_argument("--base-url", required=True,
                        help="where the release's archives are downloaded from (https)")
    parser.add_argument("--homepage", required=True, help="the plugin's homepage")
    parser.add_argument("--template", type=Path, default=TEMPLATE)
    args = parser.parse_args(argv)
    template = yaml.safe_load(args.template.read_text())
    try:
        manifest = fill(template, args.base_url, args.homepage, args.archives)
    except FileNotFoundError as exc:
        print(f"krew_manifest: no archive {exc.filename}", file=sys.stderr)
        return 1
    errors = validate(manifest, args.template.stem)
    if errors:
        print("krew_manifest: krew would refuse it:\n  " + "\n  ".join(errors), file=sys.stderr)
        return 1
    sys.stdout.write(yaml.safe_dump(manifest, sort_keys=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
