"""The layout the structure rules ask for, held by a test so it stays: every module of the pure
layer lives in a package named after its concept, and no module grows past what one reader
takes in (600 lines); the import order between those packages is import-linter's
(``acyclic_siblings`` in pyproject.toml)."""

from __future__ import annotations

from pathlib import Path

import lws_operator

PACKAGE = Path(lws_operator.__file__).parent
LONGEST = 600


def test_no_module_of_the_pure_layer_lies_outside_a_package() -> None:
    loose = sorted(p.name for p in (PACKAGE / "logic").glob("*.py") if p.name != "__init__.py")
    assert loose == [], f"{loose}: put each into the package of its concept"


def test_no_module_is_longer_than_one_reader_takes_in() -> None:
    long = {str(p.relative_to(PACKAGE)): n for p in sorted(PACKAGE.rglob("*.py"))
            if (n := len(p.read_text().splitlines())) > LONGEST}
    assert long == {}, f"modules over {LONGEST} lines: {long}; split them by concept"


def _module_name(path: Path) -> str:
    """The name pytest's default import mode gives a test file: its basename, prefixed by the
    packages (folders with ``__init__.py``) it sits in."""
    parts = [path.stem]
    folder = path.parent
    while (folder / "__init__.py").exists():
        parts.insert(0, folder.name)
        folder = folder.parent
    return ".".join(parts)


def test_no_two_test_modules_share_a_name() -> None:
    """Two test files with one module name (``test_x.py`` in two folders that are not packages)
    make pytest refuse the second when both are collected, as ``make test`` collects them all;
    run alone, each passes, so nothing else would tell."""
    repo = PACKAGE.parent
    seen: dict[str, list[str]] = {}
    for top in ("tests", "e2e"):
        for path in sorted((repo / top).rglob("test_*.py")):
            seen.setdefault(_module_name(path), []).append(str(path.relative_to(repo)))
    clashes = {name: paths for name, paths in seen.items() if len(paths) > 1}
    assert clashes == {}, f"rename one of each: {clashes}"
