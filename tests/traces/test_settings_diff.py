"""The one comparison every resuming command uses to refuse a folder made with other settings."""
from traces.settings_diff import differing_keys


def test_nested_keys_absent_keys_and_skipped_keys():
    old = {"out": "a", "seed": 0, "hw": {"gpu": "rtx4090", "link": {"gbs": 25.0}}, "gone": 1}
    new = {"out": "b", "seed": 0, "hw": {"gpu": "rtx3090", "link": {"gbs": 25.0}}, "new": [1]}
    assert differing_keys(old, new, skip=("out",)) == [
        "gone (1 -> '<absent>')", "hw.gpu ('rtx4090' -> 'rtx3090')", "new ('<absent>' -> [1])"]
    assert differing_keys(old, new)[-1] == "out ('a' -> 'b')"
    assert differing_keys(old, dict(old)) == []


def test_a_mapping_replaced_by_a_scalar_is_named_once():
    assert differing_keys({"hw": {"gpu": "x"}}, {"hw": "rtx4090"}) == ["hw"]
    # skip applies to top-level keys only: a nested key of the same name is still compared
    assert differing_keys({"a": {"out": 1}}, {"a": {"out": 2}}, skip=("out",)) == ["a.out (1 -> 2)"]
