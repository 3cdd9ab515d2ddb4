"""A skipped row and a judged row of one key name it with the same record: key, label and spelling."""
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
    assert str(row) == str(skip) == "cann[ascend910b1/reference] fp16 forward alpha=0.2"
    key_fields = [f.name for f in dataclasses.fields(RowKey) if not f.kw_only]
    assert [f.name for f in dataclasses.fields(Row)][:7] == key_fields == [f.name for f in dataclasses.fields(Skip)][:7]
    assert all("op" in {f.name for f in dataclasses.fields(r)} for r in (Row, Skip))


def test_the_op_is_spelled_and_keyed_only_when_it_is_not_leaky_relu() -> None:
    prelu = Skip(*KEY, "why", op="prelu")
    assert prelu.key == (*KEY, "prelu") and Skip(*KEY, "why", op="leaky_relu").key == KEY
    assert str(prelu) == "cann[ascend910b1/reference] prelu fp16 forward alpha=0.2"


def test_a_row_without_profile_or_variant_is_labelled_by_its_backend_alone() -> None:
    assert str(Skip("torch", None, None, "float32", "float16", "backward", 1.5, "why")) == \
        "torch fp32->fp16 backward alpha=1.5"


def test_every_record_of_a_row_embeds_the_key_and_spells_it_one_way() -> None:
    from conformance.judge.agreement import Agreement
    from conformance.pytest_plugin import RowCase
    from conformance.suite import RowSpec

    spelled = "cann[ascend910b1/reference] fp16 forward alpha=0.2"
    records = [Row(*KEY, met.empty(elements=4), (), "pass"), Skip(*KEY, "why"), RowSpec(*KEY),
               Agreement(*KEY, reference="torch", identical=True, differing=0, elements=4, why=""),
               RowCase(*KEY, fn=abs)]
    for record in records:
        assert isinstance(record, RowKey) and record.key == KEY
        assert str(record) == spelled, type(record).__name__


def test_a_pair_of_two_dtypes_is_spelled_with_an_arrow_and_a_code_type_as_itself() -> None:
    assert str(RowKey("torch", None, None, "float32", "bfloat16", "forward", 0.01)) == \
        "torch fp32->bf16 forward alpha=0.01"
    assert str(RowKey("tflite", "xnnpack", None, "int8", "int8", "forward", 0.2)) == \
        "tflite[xnnpack] int8 forward alpha=0.2"


def test_a_reproducer_names_the_row_it_failed_in() -> None:
    import numpy as np

    from conformance.cases.corpus import Case, Reproducer

    rep = Reproducer(Case(np.zeros(3, np.float16), 0.2), "cann", "ascend910b1", "reference", "tail-block")
    assert rep.key.key == KEY
