"""The house's layers as the layers contract in .importlinter writes them, the one place they are
written (lint-imports holds the imports to them). Read by the checks that apply the same order to
what an import cannot show: model relations (tests/house/test_model_layers.py) and calls that climb
a layer while a fact is followed through the code (bench/fact_walk.py). Nothing at run time reads it.

    layer_order() -> [["core"], ["drugs"], ..., ["recalls", "patients"], ...]   lowest first
    layer_ranks() -> {"core": 0, "drugs": 1, ..., "recalls": 3, "patients": 3, ...}
"""

import configparser
from pathlib import Path

IMPORTLINTER = Path(__file__).resolve().parent.parent / ".importlinter"


def layer_order(path: Path = IMPORTLINTER) -> list[list[str]]:
    """The layers contract's layers, lowest first; each a list of the apps side by side in it
    (`recalls | patients`, or `:` for siblings that may import each other)."""
    config = configparser.ConfigParser()
    config.read(path)
    lines = config["importlinter:contract:layers"]["layers"].split("\n")
    layers = [[name.strip() for name in line.replace(":", "|").split("|")] for line in lines if line.strip()]
    return list(reversed(layers))


def layer_ranks(path: Path = IMPORTLINTER) -> dict[str, int]:
    """App -> its layer's place, 0 at the bottom; apps side by side in one layer share a rank."""
    return {app: rank for rank, layer in enumerate(layer_order(path)) for app in layer}
