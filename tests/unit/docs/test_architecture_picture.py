"""``docs/architecture.svg`` is the picture the code draws today.

The picture opens ``docs/architecture.md``; a package moved, added or tangled without the picture
redrawn fails here, with the command that redraws it.
"""

from __future__ import annotations

from hack import architecture_picture as picture


def test_the_committed_picture_is_current() -> None:
    committed = picture.OUTPUT.read_text() if picture.OUTPUT.exists() else ""
    assert committed == picture.picture(), (
        "docs/architecture.svg is not what the code draws: run `make architecture-picture` "
        "and commit the file")


def test_bands_are_the_layer_contract_in_its_order() -> None:
    layers = picture.layer_contract(picture.REPO / "pyproject.toml")
    bands, _ = picture.build(picture.import_graph(), layers)
    assert [band.layers for band in bands if not band.side] == layers


def test_every_module_is_in_one_box_but_packages_that_only_name_themselves() -> None:
    graph = picture.import_graph()
    bands, _ = picture.build(graph, picture.layer_contract(picture.REPO / "pyproject.toml"))
    drawn = [module for band in bands for box in band.boxes for module in box.members]
    assert len(drawn) == len(set(drawn))
    left_out = set(graph) - set(drawn)
    assert all(picture.is_package(module)
               and not picture.defines_something(picture.module_path(module))
               for module in left_out), left_out
    assert "lws_operator.__main__" in drawn
