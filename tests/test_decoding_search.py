"""mt/decoding/search.py: the one loop with a rule plugged in. A new search rule is one class and
one line in mt.decoding.rules.RULES (docs/development.md, "A search rule"); here a toy rule,
greedy cut after two tokens, is registered that way and runs through `mt translate`."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from test_decoding_rules import beam_search, greedy, random_src, small_model

from conftest import TOY
from mt.config import DecodeConfig
from mt.decoding import rules
from mt.decoding.search import Moves, Scores
from mt.vocab import EOS

CUT = 2  # the toy rule's tokens


class Clipped(rules.Greedy):
    """Greedy, but every output ends after CUT tokens: <eos> at step CUT whatever the model
    says. It wants every greedy config (beam 1, no sampling)."""

    @classmethod
    def wanted(cls, cfg: DecodeConfig) -> bool:
        return cfg.beam == 1 and cfg.sampling == "none"

    def step(self, t: int, scores: Scores, hyp: torch.Tensor, rows: torch.Tensor) -> Moves:
        if t < CUT:
            return super().step(t, scores, hyp, rows)
        ended = torch.arange(len(rows), device=rows.device)
        return Moves(torch.full_like(rows, EOS)[:0], ended[:0], ended=ended,
                     scores=[float("nan")] * len(rows))


def test_a_registered_rule_is_what_mt_translate_decodes_with(tiny_run, cli, tmp_path,
                                                             monkeypatch):
    lines = (TOY / "toy.test.en").read_text(encoding="utf-8").splitlines()[:8]
    src = tmp_path / "in.txt"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    plain = cli("translate", tiny_run, "-i", src, "--threads", "1")
    assert plain.code == 0, plain.err
    monkeypatch.setitem(rules.RULES, "clipped", Clipped)
    assert rules.pick(DecodeConfig()) is Clipped and rules.pick(DecodeConfig(beam=2)) is rules.Beam
    clipped = cli("translate", tiny_run, "-i", src, "--threads", "1")
    assert clipped.code == 0, clipped.err
    # spaCy words: the greedy translation's first two words, and the scores the engine gives
    want = [" ".join(line.split()[:CUT]) for line in plain.out.splitlines()]
    assert clipped.out.splitlines() == want != plain.out.splitlines()
    beam = cli("translate", tiny_run, "-i", src, "--threads", "1", "--beam", "2")
    assert all(len(line.split()) > CUT for line in beam.out.splitlines())  # beam: not clipped


@pytest.mark.parametrize("seed", range(2))
def test_each_rule_is_the_loop_with_its_own_step(seed):
    """The loop runs any rule: Clipped gives greedy's first CUT tokens; greedy and beam search
    through it keep their equivalence (beam 1 is greedy)."""
    model, src = small_model(8, seed), random_src(5, 7, 8, seed)
    cfg = DecodeConfig(max_len_a=1.0, max_len_b=3)
    free = greedy(model, src, cfg)
    assert greedy(model, src, cfg, rule=Clipped) == [ids[:CUT] for ids in free]
    assert [h[0].tokens for h in beam_search(model, src, cfg)] == free


def test_a_new_option_and_the_rule_it_picks_reach_mt_translate(tiny_run, cli, tmp_path,
                                                                monkeypatch):
    """docs/development.md's two recipes together, each through the files it names: a
    decoding option is a DecodeConfig field declared with mt.config.option (here in a
    subclass that stands in for the edited class), and a search rule is a class and a line in
    RULES; `mt translate --clip 2` then decodes with the rule the option picks."""
    from mt import config

    @dataclasses.dataclass
    class WithClip(config.DecodeConfig):
        clip: int = config.option(0, "Cut each output after N tokens (0: off).", ge=0,
                                  commands=("translate",))

    class Clip(rules.Greedy):
        @classmethod
        def wanted(cls, cfg: DecodeConfig) -> bool:
            return getattr(cfg, "clip", 0) > 0

        def step(self, t: int, scores: Scores, hyp: torch.Tensor, rows: torch.Tensor) -> Moves:
            if t < self.cfg.clip:
                return super().step(t, scores, hyp, rows)
            ended = torch.arange(len(rows), device=rows.device)
            return Moves(rows[:0], ended[:0], ended=ended, scores=[float("nan")] * len(rows))

    monkeypatch.setattr(config, "DecodeConfig", WithClip)
    monkeypatch.setitem(rules.RULES, "clip", Clip)
    src = tmp_path / "in.txt"
    src.write_text("\n".join((TOY / "toy.test.en").read_text(encoding="utf-8")
                             .splitlines()[:6]) + "\n", encoding="utf-8")
    plain = cli("translate", tiny_run, "-i", src, "--threads", "1")
    clipped = cli("translate", tiny_run, "-i", src, "--threads", "1", "--clip", "3")
    assert clipped.code == 0, clipped.err
    want = [" ".join(line.split()[:3]) for line in plain.out.splitlines()]
    assert clipped.out.splitlines() == want != plain.out.splitlines()
    bad = cli("translate", tiny_run, "-i", src, "--clip", "-1")
    assert bad.code == 3 and "--clip -1: decode.clip must be 0 or positive" in bad.err
