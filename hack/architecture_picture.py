"""Draw ``docs/architecture.svg``, the layers of ``lws_operator`` and their packages, from the code.

The picture opens ``docs/architecture.md``, so it must never tell a story the code no longer
tells: everything in it is read from the tree each time. The layers and their order are the
``layers`` contract of import-linter in ``pyproject.toml`` (the rule CI already enforces), the
packages are the folders under each layer, and the arrows are the imports that import-linter
itself sees (its graph library, ``grimp``, which it installs), counted module by module and
summed per pair of packages. ``tests/unit/test_architecture_picture.py`` regenerates the picture
in memory and fails when the committed file differs, so a move that changes the picture fails CI
until ``make architecture-picture`` has been run and the new picture committed.

What the picture shows and why:

* a band per layer, the top layer first; modules that no layer names (``options``, ``flags``)
  stand in a column of their own at the right, just below the highest box that imports them;
* in a band, one box per package: a layer's subpackages (``logic/rollout``) each have their own,
  the modules directly in a layer's folder share one; a box says how many modules and lines it
  holds;
* an arrow is the imports from one package into another, wider for more module imports;
* a box that more than half of the other boxes import (``api``, ``logic/objects``) is the ground
  the house stands on: its arrows would be most of the picture and say nothing, so they are not
  drawn and the box says how many packages import it;
* a band of more packages than fit in a row (``logic``) is a matrix: a row per package, read
  against a column per package, with the number of module imports in the cell. Its packages
  import each other too often for arrows to stay readable, and the cells show every pair. The
  packages are ordered so that as few imports as possible run back up (an exact search: the
  bands are small); those that still do are loops between packages, and their cells are orange
  so that they stay visible until they are gone. The arrows from the other bands land on the
  column heads.

The file is plain SVG text written here, byte for byte the same for the same code: inputs are
sorted, the layout is fixed arithmetic rounded to tenths, and nothing records a time or a path.

    .venv/bin/python hack/architecture_picture.py            # write docs/architecture.svg
    .venv/bin/python hack/architecture_picture.py --check    # fail if it is not current
"""

from __future__ import annotations

import argparse
import ast
import math
import sys
import tomllib
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import escape

REPO = Path(__file__).resolve().parents[1]
ROOT = "lws_operator"
OUTPUT = REPO / "docs" / "architecture.svg"

# Geometry of the sheet, in SVG user units (the picture is scaled to the page's width).
WIDTH = 1000.0
MARGIN = 12.0
SIDE_WIDTH = 150.0  # the column of modules outside the layers
GAP = 14.0  # between the main bands and the side column
BAND_PAD = 12.0
BAND_TITLE = 24.0
BOX_HEIGHT = 42.0
BOX_GAP = 10.0
ROW_GAP = 46.0
EXACT_UP_TO = 14  # packages in a band, for the exact search of its order
MAX_PER_ROW = 6  # a band of more packages is drawn as a matrix
MATRIX_ROW = 24.0  # room for the arrows between two rows of one band
BAND_GAP = 52.0  # and between two bands
FONT = "Helvetica, Arial, sans-serif"
CHAR = 0.56  # a character's advance, as a fraction of the font size, for sizing boxes

# One tint per band from the top; the side column is grey.
BAND_COLOURS = [
    ("#f3effa", "#ddd3f0", "#6a4c9c"),
    ("#eef4fb", "#cfe0f3", "#2f5d8a"),
    ("#eef8f2", "#cfe9d9", "#2e7a4f"),
    ("#fbf6ea", "#f2e2bd", "#8a6516"),
    ("#f7efed", "#ecd3cd", "#8c4234"),
]
SIDE_COLOURS = ("#f4f4f4", "#e2e2e2", "#555555")
ARROW = "#5b6b7f"
BACK_ARROW = "#d9730d"


@dataclass
class Box:
    """One package (or a layer's own modules) as drawn."""

    name: str  # the module that owns the box: lws_operator.logic.rollout
    label: str
    band: int
    modules: int = 0
    lines: int = 0
    members: list[str] = field(default_factory=list)
    ground: bool = False
    importers: int = 0
    row: int = 0
    rank: int = 0  # place in the band's reading order, importers first
    x: float = 0.0
    y: float = 0.0
    w: float = 0.0
    h: float = BOX_HEIGHT
    # in a matrix band, the column head where the arrows from other bands land
    head: tuple[float, float, float, float] | None = None

    @property
    def cx(self) -> float:
        return self.x + self.w / 2


@dataclass
class Band:
    title: str
    subtitle: str
    layers: list[str]
    colours: tuple[str, str, str]
    side: bool = False
    matrix: bool = False
    boxes: list[Box] = field(default_factory=list)
    y: float = 0.0
    h: float = 0.0


@dataclass(frozen=True)
class Arrow:
    source: Box
    target: Box
    imports: int


# ---- reading the code ---------------------------------------------------------------------------


def layer_contract(pyproject: Path) -> list[list[str]]:
    """The modules of each layer, the top layer first, from the one ``layers`` contract."""
    config = tomllib.loads(pyproject.read_text())
    contracts = [c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers"]
    if len(contracts) != 1:
        raise SystemExit(f"expected one import-linter layers contract, found {len(contracts)}")
    layers: list[list[str]] = []
    for entry in contracts[0]["layers"]:
        separator = "|" if "|" in entry else ":"
        layers.append([part.strip() for part in entry.split(separator)])
    return layers


def module_path(module: str) -> Path:
    base = REPO.joinpath(*module.split("."))
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


def defines_something(path: Path) -> bool:
    """Whether a module holds more than a docstring (an ``__init__`` may only name its package)."""
    body = ast.parse(path.read_text()).body
    return any(not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))
               for node in body)


def import_graph() -> dict[str, set[str]]:
    """Each module of the package, and those of its modules it imports, as import-linter sees."""
    import grimp  # import-linter's own graph library, so the picture and the contracts agree

    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    graph = grimp.build_graph(ROOT, cache_dir=None)
    return {module: set(graph.find_modules_directly_imported_by(module))
            for module in sorted(graph.modules)}


def is_package(module: str) -> bool:
    return REPO.joinpath(*module.split(".")).is_dir()


def owner(module: str, layers: Sequence[str]) -> str | None:
    """The box a module is drawn in: its layer's subpackage, or the layer itself."""
    for layer in layers:
        if module == layer or module.startswith(layer + "."):
            rest = module[len(layer) + 1:].split(".") if module != layer else []
            if len(rest) > 1 or (rest and is_package(f"{layer}.{rest[0]}")):
                return f"{layer}.{rest[0]}"
            return layer
    return None


# ---- the model: bands, boxes, arrows -------------------------------------------------------------


def build(graph: dict[str, set[str]], layers: list[list[str]]) -> tuple[list[Band], list[Arrow]]:
    flat = [layer for level in layers for layer in level]
    outside = sorted({_top(module) for module in graph} - {_top(layer) for layer in flat})
    owners: dict[str, str] = {}
    for module in graph:
        owners[module] = owner(module, flat) or _top(module)

    members: dict[str, list[str]] = defaultdict(list)
    for module, owned_by in owners.items():
        members[owned_by].append(module)
    # a box that holds nothing but an __init__ naming its package is left out
    for name in sorted(members):
        if members[name] == [name] and is_package(name) \
                and not defines_something(module_path(name)) \
                and not any(name in graph[m] for m in graph if m != name):
            del members[name]

    edges: dict[tuple[str, str], int] = defaultdict(int)
    for module in graph:
        for imported in graph[module]:
            a, b = owners[module], owners[imported]
            if a != b and a in members and b in members:
                edges[(a, b)] += 1

    bands: list[Band] = []
    for index, level in enumerate(layers):
        names = [_relative(layer) for layer in level]
        subtitle = "independent: they do not import each other" if len(level) > 1 and \
            "|" in _contract_entry(layers, index) else ""
        bands.append(Band(" | ".join(names), subtitle, level, BAND_COLOURS[index % 5]))
    side = Band("outside the layers", "", [], SIDE_COLOURS, side=True)

    boxes: dict[str, Box] = {}
    for name in sorted(members):
        layer_index = next((i for i, level in enumerate(layers)
                            for layer in level if name == layer or name.startswith(layer + ".")),
                           None)
        if layer_index is None:
            band_index = -1
            label = _relative(name) if name != ROOT else "__init__"
        else:
            band_index = layer_index
            level = layers[layer_index]
            label = _relative(name)
            if len(level) == 1 and name != level[0]:
                label = name[len(level[0]) + 1:].replace(".", "/")
        box = Box(name, label, band_index, members=sorted(members[name]))
        for module in box.members:
            path = module_path(module)
            box.lines += path.read_text().count("\n")
            if path.name != "__init__.py" or defines_something(path):
                box.modules += 1
        boxes[name] = box

    # the side column: each module stands just below the highest box that imports it
    level_of: dict[str, int] = {}

    def side_level(name: str) -> int:
        if name not in level_of:
            level_of[name] = 0  # a loop among the side's modules ends here
            above = [boxes[a].band if boxes[a].band >= 0 else side_level(a)
                     for (a, b) in edges if b == name]
            level_of[name] = min(min(above) + 1, len(layers) - 1) if above else 0
        return level_of[name]

    for name in outside:
        if name in boxes:
            side_level(name)

    others = len(boxes) - 1
    for box in boxes.values():
        box.importers = sum(1 for (a, b) in edges if b == box.name)
        box.ground = box.importers * 2 > others

    for box in sorted(boxes.values(), key=lambda b: b.name):
        (side if box.band < 0 else bands[box.band]).boxes.append(box)
    arrows = [Arrow(boxes[a], boxes[b], n) for (a, b), n in sorted(edges.items())]
    for box in side.boxes:
        box.row = level_of[box.name]
        # importers above what they import: the length of the chain of side modules over it
        box.rank = _chain(box.name, {(a, b) for (a, b) in edges
                                     if boxes[a].band < 0 and boxes[b].band < 0}, set())
    return [*bands, side], arrows


def _chain(name: str, edges: set[tuple[str, str]], seen: set[str]) -> int:
    above = [a for (a, b) in sorted(edges) if b == name and a not in seen]
    return max((_chain(a, edges, seen | {name}) + 1 for a in above), default=0)


def _top(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else module


def _relative(module: str) -> str:
    return module[len(ROOT) + 1:].replace(".", "/") if module != ROOT else ROOT


def _contract_entry(layers: list[list[str]], index: int) -> str:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    contract = next(c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers")
    return str(contract["layers"][index])


# ---- layout -------------------------------------------------------------------------------------


def order_with_fewest_back_imports(names: list[str],
                                   weight: dict[tuple[str, str], int]) -> list[str]:
    """The order of a band's packages, importers first, with the fewest imports running back up.

    An exact search over subsets while a band holds a dozen packages or so, a greedy one beyond;
    ties go to the alphabet, so the same code gives the same order.
    """
    n = len(names)
    index = {name: i for i, name in enumerate(names)}
    # back[v][u]: imports from v into u, which run back up when v stands after u
    back = [[0] * n for _ in range(n)]
    for (a, b), w in weight.items():
        if a in index and b in index:
            back[index[a]][index[b]] += w
    if n > EXACT_UP_TO:  # greedy: next, the package whose importers left over import it least
        left, greedy = set(range(n)), []
        while left:
            v = min(left, key=lambda v: (sum(back[u][v] for u in left), names[v]))
            greedy.append(names[v])
            left.remove(v)
        return greedy
    unreached = (1 << 60, ())
    best: list[tuple[int, tuple[str, ...]]] = [unreached] * (1 << n)
    best[0] = (0, ())
    for mask in range(1 << n):
        cost, order = best[mask]
        if cost >= unreached[0]:
            continue
        for v in range(n):
            if mask & (1 << v):
                continue
            # v comes after every package in mask: its imports of them run back up
            extra = sum(back[v][u] for u in range(n) if mask & (1 << u))
            candidate = (cost + extra, (*order, names[v]))
            nxt = mask | (1 << v)
            if candidate < best[nxt]:
                best[nxt] = candidate
    return list(best[(1 << n) - 1][1])


def layout(bands: list[Band], arrows: list[Arrow]) -> float:
    """Place every band and box; return the sheet's height."""
    weight = {(a.source.name, a.target.name): a.imports for a in arrows}
    main_width = WIDTH - 2 * MARGIN - SIDE_WIDTH - GAP
    main = [band for band in bands if not band.side]
    side = next(band for band in bands if band.side)

    matrices = [box for band in main if len(band.boxes) > MAX_PER_ROW for box in band.boxes]
    single = _label_width(matrices) - 6 if matrices else main_width * 0.34
    y = MARGIN + 44.0  # the title
    for band in main:
        order = order_with_fewest_back_imports([box.name for box in band.boxes], weight)
        # a package tied to none of its band stands last: it has no place in the order
        tied = {name for pair in weight for name in pair if pair[0] != pair[1]
                and all(any(box.name == n for box in band.boxes) for n in pair)}
        order = [name for name in order if name in tied] + \
            [name for name in order if name not in tied]
        if len(order) <= MAX_PER_ROW:  # a row: the layers as the contract lists them
            order.sort(key=lambda name: next(i for i, layer in enumerate(band.layers)
                                             if name == layer or name.startswith(layer + ".")))
        by_name = {box.name: box for box in band.boxes}
        ordered = [by_name[name] for name in order]
        for rank, box in enumerate(ordered):
            box.rank = rank
        band.y = y
        inner = y + BAND_TITLE + (14.0 if band.subtitle else 0.0)
        band.matrix = len(ordered) > MAX_PER_ROW
        if band.matrix:
            inner = _place_matrix(ordered, inner, main_width)
        else:
            _spread(ordered, main_width - 2 * BAND_PAD, MARGIN + BAND_PAD, single)
            for box in ordered:
                box.y = inner
            inner += BOX_HEIGHT
        band.h = inner + BAND_PAD - y
        below = main[main.index(band) + 1:][:1]
        fed = any(a.target.band >= 0 and a.target.band == bands.index(below[0])
                  and not a.target.ground for a in arrows) if below else True
        y += band.h + (BAND_GAP if fed else BAND_GAP / 2)  # no arrow comes down: less room
    bottom = main[-1].y + main[-1].h

    side_x = WIDTH - MARGIN - SIDE_WIDTH
    side.y, side.h = main[0].y, bottom - main[0].y
    free = side.y + BAND_TITLE
    for box in sorted(side.boxes, key=lambda b: (b.row, b.rank, b.name)):
        box.x, box.w = side_x + BAND_PAD, SIDE_WIDTH - 2 * BAND_PAD
        box.y = max(main[box.row].y + BAND_TITLE, free)
        free = box.y + BOX_HEIGHT + BOX_GAP + (14.0 if box.ground else 0.0)
    return bottom + 58.0  # the legend


def _label_width(boxes: list[Box]) -> float:
    return max(_text_width(box.label, 12.5, bold=True) + _text_width(_figures(box), 11)
               for box in boxes) + 30


def _place_matrix(ordered: list[Box], top: float, width: float) -> float:
    """A band of many packages: one row and one column per package, the imports in the cells.

    The packages' own arrows would cross each other dozens of times; a row per package, read
    against a column per package, says the same without a crossing. The column heads stand on
    top, where the arrows from the bands above land.
    """
    label = _label_width(ordered)
    cell = min(48.0, (width - 2 * BAND_PAD - label) / len(ordered))
    head = max(_text_width(box.label, 12, bold=True) for box in ordered) + 14
    left = MARGIN + BAND_PAD
    grid = left + label
    for i, box in enumerate(ordered):
        box.row = i
        box.x, box.y, box.w, box.h = left, top + head + i * MATRIX_ROW, label - 6, MATRIX_ROW - 2
        box.head = (grid + i * cell + 1, top, cell - 2, head - 2)
    return top + head + len(ordered) * MATRIX_ROW


def _least(box: Box) -> float:
    return max(_text_width(box.label, 13, bold=True), _text_width(_figures(box), 11)) + 16


def _fits(boxes: list[Box], width: float) -> bool:
    return sum(_least(box) for box in boxes) + BOX_GAP * (len(boxes) - 1) <= width


def _spread(boxes: list[Box], width: float, left: float, single: float) -> None:
    """Give a row's boxes widths that grow with their lines, never narrower than their words."""
    if not boxes:
        return
    least = [_least(box) for box in boxes]
    room = width - BOX_GAP * (len(boxes) - 1)
    fixed = sum(least)
    if len(boxes) == 1:  # at the left, over the rows of a matrix band: arrows pass at its right
        widths = [max(least[0], single)]
    else:
        spare = max(room - fixed, 0.0)
        shares = [math.sqrt(box.lines) for box in boxes]
        total = sum(shares) or 1.0
        widths = [m + spare * s / total for m, s in zip(least, shares, strict=True)]
    used = sum(widths) + BOX_GAP * (len(boxes) - 1)
    x = left + (max(width - used, 0.0) / 2 if len(boxes) > 1 else 0.0)
    for box, w in zip(boxes, widths, strict=True):
        box.x, box.w = x, w
        x += w + BOX_GAP


def _text_width(text: str, size: float, bold: bool = False) -> float:
    return len(text) * size * (CHAR + (0.05 if bold else 0.0))


def _figures(box: Box) -> str:
    modules = f"{box.modules} module" + ("" if box.modules == 1 else "s")
    lines = f"{box.lines / 1000:.1f}k lines" if box.lines >= 1000 else f"{box.lines} lines"
    return f"{modules}, {lines}"


# ---- drawing ------------------------------------------------------------------------------------


def _f(value: float) -> str:
    text = f"{value:.1f}"
    return text[:-2] if text.endswith(".0") else text


Rect = tuple[float, float, float, float]
DIRECTIONS = {"bottom": (0, 1), "top": (0, -1), "left": (-1, 0), "right": (1, 0)}


def _rect(box: Box, incoming: bool) -> Rect:
    if incoming and box.head is not None:
        return box.head
    return (box.x, box.y, box.w, box.h)


def _sides(arrow: Arrow) -> tuple[str, str]:
    """Which edge of its source an arrow leaves by, and which edge of its target it enters."""
    _, sy, _, sh = _rect(arrow.source, incoming=False)
    _, ty, _, _ = _rect(arrow.target, incoming=True)
    if arrow.source.band >= 0 and arrow.target.band < 0:  # into the side column, at the right
        return ("bottom", "left") if ty > sy + sh else ("right", "left")
    if arrow.source.band < 0 and arrow.target.band >= 0:  # out of it
        return ("left", "top") if ty > sy + sh else ("left", "right")
    if arrow.source.head is not None:  # a matrix's row: out at the left, away from the cells
        return ("left", "top") if ty >= sy + sh else ("left", "bottom")
    if ty >= sy + sh:
        return "bottom", "top"
    if abs(ty - sy) < 1:
        return "bottom", "bottom"
    return "top", "bottom"


def _ports(arrows: list[Arrow]) -> dict[tuple[int, str], tuple[float, float, str]]:
    """Where each arrow leaves its source and enters its target, spread along the edges.

    The ends on one edge are sorted by where the other end stands, so that arrows do not cross
    at the edge they share.
    """
    ends: dict[tuple[str, bool, str], list[tuple[float, float, int, str]]] = defaultdict(list)
    for i, arrow in enumerate(arrows):
        out_side, in_side = _sides(arrow)
        tx, ty, tw, th = _rect(arrow.target, incoming=True)
        sx, sy, sw, sh = _rect(arrow.source, incoming=False)
        ends[(arrow.source.name, False, out_side)].append((tx + tw / 2, ty + th / 2, i, "out"))
        ends[(arrow.target.name, True, in_side)].append((sx + sw / 2, sy + sh / 2, i, "in"))
    boxes = {a.source.name: a.source for a in arrows} | {a.target.name: a.target for a in arrows}
    points: dict[tuple[int, str], tuple[float, float, str]] = {}
    for (name, incoming, side), here in sorted(ends.items()):
        x, y, w, h = _rect(boxes[name], incoming)
        here.sort(key=lambda end: (end[1], end[0], end[2]) if side in ("left", "right")
                  else (end[0], end[1], end[2]))
        for k, (_, _, i, end) in enumerate(here):
            fraction = (k + 1) / (len(here) + 1)
            if side in ("top", "bottom"):
                points[(i, end)] = (x + w * (0.1 + 0.8 * fraction),
                                    y if side == "top" else y + h, side)
            else:
                points[(i, end)] = (x if side == "left" else x + w,
                                    y + h * (0.15 + 0.7 * fraction), side)
    return points


def _path(start: tuple[float, float, str], end: tuple[float, float, str]) -> str:
    x1, y1, out_side = start
    x2, y2, in_side = end
    reach = max(24.0, min(90.0, math.hypot(x2 - x1, y2 - y1) * 0.4))
    (ox, oy), (ix, iy) = DIRECTIONS[out_side], DIRECTIONS[in_side]
    c1 = (max(x1 + ox * reach, 2.0), y1 + oy * reach)  # never off the sheet's left edge
    c2 = (max(x2 + ix * reach, 2.0), y2 + iy * reach)
    return (f"M{_f(x1)},{_f(y1)} C{_f(c1[0])},{_f(c1[1])} {_f(c2[0])},{_f(c2[1])} "
            f"{_f(x2)},{_f(y2)}")


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" + ("" if count == 1 else "s")


def render(bands: list[Band], arrows: list[Arrow], height: float) -> str:
    out: list[str] = []
    add = out.append
    add('<svg xmlns="http://www.w3.org/2000/svg" '
        f'viewBox="0 0 {_f(WIDTH)} {_f(height)}" width="{_f(WIDTH)}" height="{_f(height)}" '
        f'font-family="{FONT}">')
    add("<defs>")
    for colour, key in ((ARROW, "down"), (BACK_ARROW, "back")):
        add(f'<marker id="head-{key}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
            f'markerHeight="7" markerUnits="userSpaceOnUse" orient="auto">'
            f'<path d="M0,1 L10,5 L0,9 z" fill="{colour}"/></marker>')
    add("</defs>")
    add(f'<rect width="{_f(WIDTH)}" height="{_f(height)}" fill="#ffffff"/>')
    add(f'<text x="{_f(MARGIN)}" y="{_f(MARGIN + 18)}" font-size="18" font-weight="bold" '
        'fill="#222">lws_operator: layers and packages</text>')
    add(f'<text x="{_f(MARGIN)}" y="{_f(MARGIN + 36)}" font-size="12" fill="#555">'
        "A layer imports only the layers below it (import-linter checks it); an arrow is "
        "imports from one package into another.</text>")

    for band in bands:
        _band(band, add, words=False)
    for band in bands:
        _, box_fill, ink = band.colours
        for box in band.boxes:
            add(f'<rect x="{_f(box.x)}" y="{_f(box.y)}" width="{_f(box.w)}" '
                f'height="{_f(box.h)}" rx="4" fill="{box_fill}" stroke="{ink}"/>')
            if box.ground:
                add(f'<rect x="{_f(box.x)}" y="{_f(box.y + box.h - 4)}" width="{_f(box.w)}" '
                    f'height="4" fill="{ink}"/>')
            if box.head is not None:
                x, y, w, h = box.head
                add(f'<rect x="{_f(x)}" y="{_f(y)}" width="{_f(w)}" height="{_f(h)}" rx="3" '
                    f'fill="{box_fill}" stroke="{ink}"/>')
        if band.matrix:
            _cells(band, arrows, add)

    drawn = [a for a in arrows if not a.target.ground
             and not (a.source.band == a.target.band and a.source.head is not None)]
    points = _ports(drawn)
    # the widest first, so that thin arrows stay visible on top of them
    for i, arrow in sorted(enumerate(drawn), key=lambda item: (-item[1].imports, item[0])):
        back = arrow.source.band == arrow.target.band and arrow.source.band >= 0 and \
            arrow.target.rank < arrow.source.rank
        colour, key = (BACK_ARROW, "back") if back else (ARROW, "down")
        width = 0.8 + 0.6 * math.sqrt(arrow.imports)
        add(f'<path d="{_path(points[(i, "out")], points[(i, "in")])}" fill="none" '
            f'stroke="{colour}" stroke-opacity="0.75" stroke-width="{_f(width)}" '
            f'marker-end="url(#head-{key})"><title>{escape(arrow.source.label)} imports '
            f"{escape(arrow.target.label)}: {_plural(arrow.imports, 'module import')}"
            "</title></path>")

    for band in bands:
        _band(band, add, words=True)
        _words(band, add)
    _legend(height, add)
    add("</svg>")
    return "\n".join(out) + "\n"


HALO = 'stroke-linejoin="round" paint-order="stroke" stroke-width="4"'


def _band(band: Band, add: Callable[[str], None], words: bool) -> None:
    """A band's ground, or (drawn over the arrows) its title and figures."""
    fill, _, ink = band.colours
    x = WIDTH - MARGIN - SIDE_WIDTH if band.side else MARGIN
    w = SIDE_WIDTH if band.side else WIDTH - 2 * MARGIN - SIDE_WIDTH - GAP
    dash = ' stroke-dasharray="4 3"' if band.side else ""
    if not words:
        add(f'<rect x="{_f(x)}" y="{_f(band.y)}" width="{_f(w)}" height="{_f(band.h)}" rx="8" '
            f'fill="{fill}" stroke="{ink}" stroke-opacity="0.35"{dash}/>')
        return
    add(f'<text x="{_f(x + 10)}" y="{_f(band.y + 17)}" font-size="14" font-weight="bold" '
        f'fill="{ink}" stroke="{fill}" {HALO}>{escape(band.title)}</text>')
    if not band.side and len(band.boxes) > 1:
        total = sum(box.lines for box in band.boxes)
        figures = f"{_plural(len(band.boxes), 'package')}, {total / 1000:.1f}k lines"
        add(f'<text x="{_f(x + w - 10)}" y="{_f(band.y + 17)}" font-size="11" fill="{ink}" '
            f'stroke="{fill}" {HALO} text-anchor="end">{escape(figures)}</text>')
    if band.subtitle:
        add(f'<text x="{_f(x + 10)}" y="{_f(band.y + 32)}" font-size="11" fill="{ink}">'
            f"{escape(band.subtitle)}</text>")


def _cells(band: Band, arrows: list[Arrow], add: Callable[[str], None]) -> None:
    """The imports among a matrix band's packages: row imports column, so many module imports."""
    _, _, ink = band.colours
    boxes = sorted(band.boxes, key=lambda b: b.rank)
    count = {(a.source.name, a.target.name): a.imports for a in arrows}
    most = max((n for (s, t), n in count.items()
                if any(b.name == s for b in boxes) and any(b.name == t for b in boxes)),
               default=1)
    for row in boxes:
        for column in boxes:
            assert column.head is not None
            x, _, w, _ = column.head
            y, h = row.y, row.h
            if row is column:
                add(f'<rect x="{_f(x)}" y="{_f(y)}" width="{_f(w)}" height="{_f(h)}" '
                    f'fill="{ink}" fill-opacity="0.18"/>')
                continue
            n = count.get((row.name, column.name), 0)
            if not n:
                add(f'<rect x="{_f(x)}" y="{_f(y)}" width="{_f(w)}" height="{_f(h)}" '
                    'fill="#ffffff" fill-opacity="0.55"/>')
                continue
            colour = BACK_ARROW if column.rank < row.rank else ARROW
            strength = 0.25 + 0.6 * math.sqrt(n / most)
            add(f'<rect x="{_f(x)}" y="{_f(y)}" width="{_f(w)}" height="{_f(h)}" '
                f'fill="{colour}" fill-opacity="{strength:.2f}"><title>{escape(row.label)} '
                f"imports {escape(column.label)}: {_plural(n, 'module import')}</title></rect>")
            text = "#ffffff" if strength > 0.55 else "#222"
            add(f'<text x="{_f(x + w / 2)}" y="{_f(y + h / 2 + 4)}" font-size="11.5" '
                f'font-weight="bold" fill="{text}" text-anchor="middle">{n}</text>')
    # the key, in the corner that the column heads leave free over the rows
    ground = [f"{box.label} (imported by {_plural(box.importers, 'package')})"
              for box in boxes if box.ground]
    key = ("A row's package imports the column's, so many module imports. The packages are "
           "ordered so that as few imports as can be run back up; an orange cell does: a loop.")
    if ground:
        key += " Arrows into " + ", ".join(ground) + " are not drawn."
    first = boxes[0]
    assert first.head is not None
    lines = _wrap(key, first.w, 11)
    top = max(first.head[1] + first.head[3] - 15 * len(lines) + 6, band.y + BAND_TITLE + 14)
    for k, line in enumerate(lines):
        add(f'<text x="{_f(first.x)}" y="{_f(top + 15 * k)}" font-size="11" fill="{ink}">'
            f"{escape(line)}</text>")


def _wrap(text: str, width: float, size: float) -> list[str]:
    lines: list[str] = []
    for word in text.split():
        if lines and _text_width(f"{lines[-1]} {word}", size) <= width:
            lines[-1] = f"{lines[-1]} {word}"
        else:
            lines.append(word)
    return lines


def _words(band: Band, add: Callable[[str], None]) -> None:
    _, box_fill, ink = band.colours
    for box in band.boxes:
        if box.head is not None:
            add(f'<text x="{_f(box.x + 8)}" y="{_f(box.y + box.h / 2 + 4.5)}" font-size="12.5" '
                f'font-weight="bold" fill="#222">{escape(box.label)}</text>')
            add(f'<text x="{_f(box.x + box.w - 8)}" y="{_f(box.y + box.h / 2 + 4)}" '
                f'font-size="11" fill="#444" text-anchor="end">{escape(_figures(box))}</text>')
            x, y, w, h = box.head
            cx, bottom = x + w / 2 + 4, y + h - 7
            add(f'<text x="{_f(cx)}" y="{_f(bottom)}" font-size="12" font-weight="bold" '
                f'fill="#222" stroke="{box_fill}" {HALO} '
                f'transform="rotate(-90 {_f(cx)} {_f(bottom)})">{escape(box.label)}</text>')
        else:
            add(f'<text x="{_f(box.cx)}" y="{_f(box.y + 17)}" font-size="13" font-weight="bold" '
                f'fill="#222" stroke="{box_fill}" {HALO} '
                f'text-anchor="middle">{escape(box.label)}</text>')
            add(f'<text x="{_f(box.cx)}" y="{_f(box.y + 32)}" font-size="11" fill="#444" '
                f'stroke="{box_fill}" {HALO} '
                f'text-anchor="middle">{escape(_figures(box))}</text>')
        if box.ground and box.head is None and band.side:  # no room at its right: under it
            add(f'<text x="{_f(box.cx)}" y="{_f(box.y + box.h + 14)}" font-size="10.5" '
                f'fill="{ink}" text-anchor="middle">imported by '
                f"{_plural(box.importers, 'package')}</text>")
        elif box.ground and box.head is None:
            add(f'<text x="{_f(box.x + box.w + 10)}" y="{_f(box.y + box.h / 2 + 4)}" '
                f'font-size="11" fill="{ink}">imported by '
                f"{_plural(box.importers, 'package')}: its arrows are not drawn</text>")


def _legend(height: float, add: Callable[[str], None]) -> None:
    y = height - 34
    add(f'<line x1="{_f(MARGIN)}" y1="{_f(y)}" x2="{_f(MARGIN + 28)}" y2="{_f(y)}" '
        f'stroke="{ARROW}" stroke-width="2.2" marker-end="url(#head-down)"/>')
    add(f'<text x="{_f(MARGIN + 36)}" y="{_f(y + 4)}" font-size="11.5" fill="#333">'
        "imports from one package into another, wider for more module imports</text>")
    add(f'<text x="{_f(MARGIN)}" y="{_f(y + 22)}" font-size="11.5" fill="#333">'
        "A box is a package; a dark foot marks one that most packages import. Drawn from the "
        "code by hack/architecture_picture.py.</text>")


def picture() -> str:
    layers = layer_contract(REPO / "pyproject.toml")
    bands, arrows = build(import_graph(), layers)
    height = layout(bands, arrows)
    return render(bands, arrows, height)


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="fail if the file is not current")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args(list(argv) if argv is not None else None)
    text = picture()
    if args.check:
        current = args.output.read_text() if args.output.exists() else ""
        if current != text:
            print(f"{args.output} is not current: run `make architecture-picture`")
            return 1
        return 0
    args.output.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
