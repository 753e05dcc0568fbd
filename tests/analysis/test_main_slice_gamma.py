"""The report's main slice keeps every policy of the results: a speculative policy that sets its own
draft length (AdaSpec's rows carry gamma 12) is kept at its gamma, and the policy count is right."""
import pandas as pd

from analysis.load import main_slice
from analysis.sections import setting
from tests.analysis.fixtures import row


def _rows():
    out = []
    for w in ("gsm8k", "mt_bench"):
        out += [row("paper_qwen3", "moespac", w), row("paper_qwen3", "llamacpp", w),
                row("paper_qwen3", "adaspec", w, gamma=12, tps=37.0),
                row("paper_qwen3", "moespac", w, gamma=4, tps=99.0)]   # another gamma of a policy run at 8
    return pd.DataFrame(out)


def test_a_policy_run_only_at_its_own_gamma_is_kept_and_counted():
    s = main_slice(_rows())
    assert sorted(s.rows["policy"].unique()) == ["adaspec", "llamacpp", "moespac"]
    assert set(s.rows.loc[s.rows.policy == "adaspec", "gamma"]) == {12}
    assert 99.0 not in set(s.rows["tps"]) and len(s.rows) == 6
    assert "adaspec at its own gamma=12" in s.note
    assert "- policies: 3" in setting(s.rows, s.note)


def test_without_such_a_policy_the_note_is_unchanged():
    s = main_slice(_rows().query("policy != 'adaspec'"))
    assert "own gamma" not in s.note and sorted(s.rows["policy"].unique()) == ["llamacpp", "moespac"]
