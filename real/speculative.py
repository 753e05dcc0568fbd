"""Greedy speculative decoding (draft-then-verify) with KV-cache rollback, batch 1.

The decoder is lossless: its tokens equal the target's plain greedy decoding. ``gamma=0`` runs plain
autoregressive greedy decoding through the same code (each step verifies a window of one token).

Invariant between steps: both KV caches hold ``tokens[:-1]``; the last token (the previous step's
bonus token, or the prefill's first token) is not yet fed. A step:

1. drafts ``gamma`` tokens with the draft model (its cache catches up on the tokens it has not
   seen, then grows by one per drafted token);
2. feeds the verify window ``[tokens[-1], d_1 .. d_gamma]`` (``gamma + 1`` positions) to the target;
3. accepts the longest prefix of drafts that equals the target's greedy predictions (``a``), then
   appends the target's own next token (the bonus): ``a + 1`` new tokens;
4. crops both caches back to ``tokens[:-1]`` (``DynamicCache.crop`` with a NEGATIVE count).

Row 0 of a window is therefore the previous step's last token, rows ``1..a`` the accepted drafts
and rows ``a+1..gamma`` the rejected ones. Generation stops exactly at ``max_new_tokens`` (and after
an end-of-sequence token when one is configured): the last step keeps only the tokens that fit and
reports ``accepted = kept - 1`` (every kept token equals the target's prediction, so the last kept
one plays the bonus role). An observer sees every phase; see :class:`DecodeObserver`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class Step:
    """One verify step: ``tokens`` are the ``accepted`` drafts it kept followed by one bonus token."""

    index: int
    n_verified: int  # positions in the target's verify forward (gamma + 1)
    accepted: int  # drafted tokens kept (0..gamma)
    tokens: list[int] = field(default_factory=list)  # accepted + 1 new tokens


class DecodeObserver:
    """Callbacks at the phases of a decode; subclass and override what you need (all no-ops).

    Order: ``on_prefill`` once, then per step ``on_step_start`` (draft phase begins),
    ``on_verify_start`` (the target's verify forward begins), ``on_step`` (after acceptance), and
    finally ``on_final`` when the decoder runs the extra target forward on the last token.
    """

    def on_prefill(self, prompt_len: int, first_token: int) -> None:
        """The target has processed the prompt and produced the first generated token."""

    def on_step_start(self, index: int) -> None:
        """Step ``index`` begins: the draft model is about to propose tokens."""

    def on_verify_start(self, index: int, window: list[int]) -> None:
        """The target is about to verify ``window`` (last token plus the drafts)."""

    def on_step(self, step: Step) -> None:
        """Step ``step.index`` is done: ``step.tokens`` were appended."""

    def on_final(self, token: int) -> None:
        """The target has run one extra forward on the last generated token ``token``."""


class SpeculativeDecoder:
    """Greedy speculative decoding of ``target`` with ``draft`` proposing ``gamma`` tokens a step.

    ``draft`` may be ``None`` when ``gamma == 0`` (plain greedy decoding). ``eos_token_id`` (an id
    or a collection of ids) stops generation after that token. With ``final_forward=True`` the
    target also runs on the last generated token, so every generated token has been an input of
    some target forward (router recording needs this; it does not change the tokens).
    """

    def __init__(self, target, draft=None, gamma: int = 4, eos_token_id=None,
                 observer: DecodeObserver | None = None, final_forward: bool = False):
        if gamma < 0:
            raise ValueError(f"gamma must be >= 0, got {gamma}")
        if gamma > 0 and draft is None:
            raise ValueError("speculative decoding (gamma > 0) needs a draft model")
        self.target, self.draft, self.gamma = target, draft, gamma
        self.eos = _as_id_set(eos_token_id)
        self.observer = observer or DecodeObserver()
        self.final_forward = final_forward

    def generate(self, input_ids, max_new_tokens: int) -> tuple[list[int], list[Step]]:
        """Decode up to ``max_new_tokens`` tokens after the prompt; return ``(tokens, steps)``."""
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        from transformers import DynamicCache
        prompt = _as_id_list(input_ids)
        with torch.inference_mode():
            self._tcache = DynamicCache(config=self.target.config)
            self._dcache = DynamicCache(config=self.draft.config) if self.draft is not None else None
            tokens = prompt + [self._prefill(prompt)]
            self.observer.on_prefill(len(prompt), tokens[-1])
            steps = self._loop(tokens, len(prompt), max_new_tokens)
            if self.final_forward:
                self.run_target(tokens[-1:], last_only=True)
                self.observer.on_final(tokens[-1])
        self._tcache = self._dcache = None
        return tokens[len(prompt):], steps

    def _prefill(self, prompt: list[int]) -> int:
        return int(self.run_target(prompt, last_only=True)[-1].argmax())

    def _loop(self, tokens: list[int], n_prompt: int, max_new: int) -> list[Step]:
        steps: list[Step] = []
        done = tokens[-1] in self.eos or max_new == 1
        while not done:
            g = self.next_gamma(len(steps))
            step = Step(index=len(steps), n_verified=g + 1, accepted=0)
            self.observer.on_step_start(step.index)
            drafts = self._draft(tokens, g) if g else []
            window = tokens[-1:] + drafts
            self.observer.on_verify_start(step.index, window)
            pred = self.run_target(window).argmax(-1).tolist()
            new, done = self._accept(drafts, pred, max_new - (len(tokens) - n_prompt))
            step.accepted, step.tokens = len(new) - 1, new
            tokens.extend(new)
            _crop_to(self._tcache, len(tokens) - 1)
            steps.append(step)
            self.observer.on_step(step)
        return steps

    def next_gamma(self, index: int) -> int:
        """Drafts of step ``index`` (``gamma``; an offloaded decoder may ask its policy instead).
        Any value in 0..gamma keeps decoding lossless: a step with fewer drafts only verifies less,
        and the draft's cache catches up on the tokens it skipped at its next use."""
        return self.gamma

    def _draft(self, tokens: list[int], n: int | None = None) -> list[int]:
        """Propose ``n`` (default ``gamma``) tokens greedily with the draft model."""
        _crop_to(self._dcache, len(tokens) - 1)
        feed, drafts = tokens[self._dcache.get_seq_length():], []
        for _ in range(self.gamma if n is None else n):
            drafts.append(int(self.run_draft(feed)[-1].argmax()))
            feed = drafts[-1:]
        return drafts

    def _accept(self, drafts: list[int], pred: list[int], budget: int) -> tuple[list[int], bool]:
        """The kept tokens (accepted drafts + bonus, cut at EOS and budget) and whether to stop."""
        a = 0
        while a < len(drafts) and drafts[a] == pred[a]:
            a += 1
        new = drafts[:a] + [pred[a]]
        for i, tok in enumerate(new):
            if tok in self.eos:
                return new[:min(i + 1, budget)], True
        return new[:budget], len(new) >= budget

    def run_target(self, ids: list[int], last_only: bool = False) -> torch.Tensor:
        """One cached target forward (prefill, verify window or final token); returns its logits.

        The single place the target runs: an offloaded execution engine overrides it.
        """
        return self._forward(self.target, self._tcache, ids, last_only)

    def run_draft(self, ids: list[int]) -> torch.Tensor:
        """One cached draft forward; returns the logits of its last position (``[1, V]``)."""
        return self._forward(self.draft, self._dcache, ids, last_only=True)

    @staticmethod
    def _forward(model, cache, ids: list[int], last_only: bool = False) -> torch.Tensor:
        """Logits ``[len(ids), V]`` (or ``[1, V]`` with ``last_only``) of one cached forward."""
        device = model.get_input_embeddings().weight.device
        if device.type == "meta":  # offloaded by accelerate: its hooks move the inputs
            device = torch.device("cpu")
        x = torch.tensor([ids], dtype=torch.long, device=device)
        out = model(input_ids=x, cache=cache, use_cache=True, logits_to_keep=1 if last_only else 0)
        return out.logits[0]


def mean_accepted(steps: list[Step]) -> float:
    """Mean accepted drafted tokens per verify step (0.0 when there were no steps)."""
    return sum(s.accepted for s in steps) / len(steps) if steps else 0.0


def _crop_to(cache, length: int) -> None:
    """Drop cached positions beyond ``length`` (transformers 5.x: crop takes minus the count)."""
    extra = cache.get_seq_length() - length
    if extra > 0:
        cache.crop(-extra)


def _as_id_set(eos) -> frozenset[int]:
    if eos is None:
        return frozenset()
    if isinstance(eos, int):
        return frozenset([eos])
    return frozenset(int(e) for e in eos)


def _as_id_list(input_ids) -> list[int]:
    if isinstance(input_ids, torch.Tensor):
        if input_ids.dim() == 2 and input_ids.shape[0] != 1:
            raise ValueError(f"batch size must be 1, got input_ids of shape {tuple(input_ids.shape)}")
        input_ids = input_ids.reshape(-1).tolist()
    ids = [int(i) for i in input_ids]
    if not ids:
        raise ValueError("the prompt is empty")
    return ids
