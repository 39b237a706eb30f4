"""Every notebook's parameters cell declares its profile section with the same defaults."""

from __future__ import annotations

from pathlib import Path

import papermill
import pytest

from hbpsych_utils.core import config, paths

NOTEBOOKS = sorted(paths.notebooks_dir().glob("[0-9][0-9]_*.ipynb"))
RUN_KEYS = {"profile", "outputs_root", "seed"}
OPTIONAL_RUN_KEYS = {"llm"}  # declared by the notebooks that call models


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_parameters_cell_matches_profile_section(nb: Path) -> None:
    declared = papermill.inspect_notebook(str(nb))
    assert RUN_KEYS <= set(declared), f"{nb.name} must declare {RUN_KEYS}"
    field = config.section_name(nb.stem)
    model = config.Profile.model_fields.get(field)
    section_fields = model.annotation.model_fields if model else {}
    # values of another section the runner passes (06: grading's judges), default None
    cross = set(config.CROSS_SECTION_PARAMETERS.get(nb.stem, {}))
    assert cross <= set(declared), f"{nb.name} must declare {cross}"
    for key in cross:
        assert eval(declared[key]["default"]) is None, f"{nb.name}: {key} must default to None"
    assert set(declared) - RUN_KEYS - OPTIONAL_RUN_KEYS - cross == set(section_fields), (
        f"{nb.name}: parameters cell and Profile.{field} declare different keys"
    )
    for key, info in section_fields.items():
        default = declared[key]["default"]
        assert eval(default) == info.default, f"{nb.name}: default of {key} differs from config"


def test_notebooks_are_committed_clean() -> None:
    import json

    for nb in NOTEBOOKS:
        cells = json.loads(nb.read_text())["cells"]
        assert not any(c.get("outputs") for c in cells if c["cell_type"] == "code"), nb.name
