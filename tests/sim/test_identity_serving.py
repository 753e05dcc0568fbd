"""Serving options in a run's identity: one loop over the spec, the prefill's rule knobs only with
prefill, the micro-batch always (it sizes the memory plan)."""
from sim.run.identity import run_id
from sim.run.resolve import resolve
from sim.run.spec import RunSpec

BASE = dict(policy="llamacpp", model="olmoe_1b_7b", gen_tokens=8)


def _ident(**kw) -> dict:
    return resolve(RunSpec.of(**BASE, **kw)).identity


def test_prefill_knobs_join_the_identity_only_with_prefill():
    default = _ident()
    assert _ident(prefill_rule="cpu", prefill_threshold=512) == default
    # -ub sizes llama.cpp's compute buffer, so the memory plan: it joins whenever it differs
    assert _ident(ubatch=256)["ubatch"] == 256
    with_prefill = _ident(prefill=True, ubatch=256)
    assert with_prefill["prefill"] is True and with_prefill["ubatch"] == 256
    assert "prefill_rule" not in with_prefill and "batch" not in with_prefill    # defaults stay out
    assert run_id(with_prefill) != run_id(_ident(prefill=True))


def test_batch_and_stagger_join_the_identity_without_prefill():
    ident = _ident(batch=2, stagger=1, ubatch=128)
    assert {k: ident[k] for k in ("batch", "stagger")} == {"batch": 2, "stagger": 1}
    assert ident["ubatch"] == 128 and "prefill" not in ident
