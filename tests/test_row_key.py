"""A skipped row and a judged row of one key name it with the same record: key, label and title."""
from __future__ import annotations

import dataclasses

from conformance.metrics import exact as met
from conformance.records import Row, RowKey, Skip

KEY = ("cann", "ascend910b1", "reference", "float16", "float16", "forward", 0.2)


def test_a_skip_and_a_row_of_one_key_share_its_fields_and_words() -> None:
    row = Row(*KEY, met.empty(elements=4), (), "pass")
    skip = Skip(*KEY, "no fp16 on this chip")
    assert isinstance(row, RowKey) and isinstance(skip, RowKey)
    assert row.key == skip.key == KEY
    assert row.label == skip.label == "cann[ascend910b1/reference]"
    assert row.title == skip.title == "cann[ascend910b1/reference] float16->float16 forward alpha=0.2"
    key_fields = [f.name for f in dataclasses.fields(RowKey)]
    assert [f.name for f in dataclasses.fields(Row)][:7] == key_fields == [f.name for f in dataclasses.fields(Skip)][:7]


def test_a_row_without_profile_or_variant_is_labelled_by_its_backend_alone() -> None:
    assert Skip("torch", None, None, "float32", "float16", "backward", 1.5, "why").title == \
        "torch float32->float16 backward alpha=1.5"
