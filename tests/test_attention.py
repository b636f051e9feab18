"""mt/attention.py: a batch's outputs as rows (an ensemble's encoder output taken per model),
tokens labelled as a reader sees them, weights rounded at any depth. Alignments and attention
through the Translator: tests/test_decoding_align.py and tests/test_translator.py."""

from __future__ import annotations

import torch

from mt.attention import Searched, labels, rounded
from mt.decoding.request import Hypothesis
from mt.records import Translation


class Marks:
    def detokenize(self, tokens):
        return "".join(tokens).replace("▁", " ")


def test_a_batch_as_rows_of_its_outputs():
    hyps = [[Hypothesis([4], -1.0), Hypothesis([5, 6], -2.0)], [Hypothesis([7], -0.5)]]
    out = [[Translation("a", -1.0), Translation("b", -2.0)], [Translation("c", -0.5)]]
    memory = torch.arange(6.0).view(2, 3, 1)  # (B, S, D)
    batch = Searched(torch.ones(2, 3, dtype=torch.long), 0, memory, hyps, out)
    assert batch.rows == [0, 0, 1] and batch.outputs == [[4], [5, 6], [7]]
    assert [t.text for t in batch.translations()] == ["a", "b", "c"]
    assert batch.memory_rows(batch.rows).tolist() == memory[[0, 0, 1]].tolist()
    ensemble = Searched(batch.src, 0, [memory, memory * 2], hyps, out)
    assert [m.tolist() for m in ensemble.memory_rows([1])] == [memory[[1]].tolist(),
                                                                (memory * 2)[[1]].tolist()]


def test_labels_and_rounding():
    assert labels(["▁New", "York", "▁"], Marks()) == ["New", "York", "▁"]
    assert rounded([[0.123456, 0.5], [1.0, 0.0]], 2) == [[0.12, 0.5], [1.0, 0.0]]
    assert rounded([[[0.126]]], 1) == [[[0.1]]]
    assert rounded([0.123456], None) == [0.123456]
