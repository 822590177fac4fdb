"""Names become safe file-name components; a path outside its output folder is refused."""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from capture_trainer.errors import TrialError
from capture_trainer.paths import (
    MAX_COMPONENT_BYTES, MAX_STEM_BYTES, file_inside, resolve_inside, safe_component, trial_file,
)

READABLE = ["S01_paper-2019_dg_r1", "controller_paper-2019_as_r3", "novice_paper-2019_dg_s0", "P03",
            "alice", "Jane Doe", "paper-2019", "a.b", "Zoë", "Łukasz", "参加者1", "x+y@lab=1,(2)~"]
HOSTILE = ["../../../tmp/x", "../x y", "..", ".", "", ".hidden", "a/b", "a\\b", "a\x00b", "tab\there",
           "new\nline", "C:evil", "x" * 1000, "ü" * 300, "a..b", " padded ", "trailing.", "NUL", "\u202eevil",
           "\ud800lone"]


@pytest.mark.parametrize("name", READABLE)
def test_readable_names_are_unchanged(name: str) -> None:
    assert safe_component(name) == name


def _is_safe(component: str, max_bytes: int) -> bool:
    return (
        bool(component)
        and "/" not in component and "\\" not in component and ".." not in component
        and not component.startswith(".") and not component.endswith((".", " "))
        and all(unicodedata.category(c)[0] not in "CZ" or c == " " for c in component)
        and len(component.encode("utf-8")) <= max_bytes
    )


@pytest.mark.parametrize("name", HOSTILE, ids=repr)
def test_hostile_names_become_safe_distinct_components(name: str, tmp_path: Path) -> None:
    component = safe_component(name)
    assert _is_safe(component, MAX_COMPONENT_BYTES)
    assert safe_component(component) == component  # idempotent
    resolve_inside(tmp_path, tmp_path / component)
    assert component != safe_component(name + "!")


@given(st.text(max_size=400))
def test_any_text_becomes_a_safe_idempotent_component(name: str) -> None:
    component = safe_component(name, MAX_STEM_BYTES)
    assert _is_safe(component, MAX_STEM_BYTES)
    assert safe_component(component, MAX_STEM_BYTES) == component


def test_both_unicode_normal_forms_give_one_component() -> None:
    nfd = unicodedata.normalize("NFD", "Zoë Brontë")
    assert nfd != "Zoë Brontë" and safe_component(nfd) == safe_component("Zoë Brontë") == "Zoë Brontë"


def test_a_path_outside_the_folder_is_refused_in_one_line(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with pytest.raises(TrialError, match="outside the output folder") as error:
        resolve_inside(out, out / ".." / "x.parquet")
    assert "\n" not in str(error.value)
    assert resolve_inside(out, out / "sub" / "x.parquet") == out / "sub" / "x.parquet"


def test_a_link_in_the_folder_cannot_send_a_write_elsewhere(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    os.symlink(tmp_path / "elsewhere.parquet", out / "t1.parquet")
    with pytest.raises(TrialError, match="outside the output folder"):
        trial_file(out, "t1")
    assert file_inside(out, "../t2", ".parquet").parent == out
