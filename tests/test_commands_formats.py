"""mt/commands/formats.py: what `mt translate` writes for each input line in each --format:
the JSON lines hold the text and n-best formats' translations and scores, one line per input
line (none split by a line separator inside it), empty lines included."""

import json

import pytest

JSONL_LINES = ["Today you have eight cats.", "", "Yesterday we had sixty old houses.", "   ",
               "Gestern \u2028 Häuser \"quoted\"\tand a tab", "We have two dogs."]


def test_jsonl_is_the_text_and_nbest_formats_as_json_lines(cli, tiny_run):
    text = ("\n".join(JSONL_LINES) + "\n").encode("utf-8")
    nbest = cli("translate", tiny_run, "--beam", "3", "--nbest", "2", stdin=text)
    plain = cli("translate", tiny_run, "--beam", "3", stdin=text)
    as_json = cli("translate", tiny_run, "--beam", "3", "--nbest", "2", "--format", "jsonl",
                  stdin=text)
    best_json = cli("translate", tiny_run, "--beam", "3", "--format", "jsonl", stdin=text)
    for r in (nbest, plain, as_json, best_json):
        assert r.code == 0, r.err
    records = [json.loads(line) for line in as_json.out.split("\n")[:-1]]
    best = [json.loads(line) for line in best_json.out.split("\n")[:-1]]
    assert len(records) == len(best) == len(JSONL_LINES)  # one line each, none split
    rows = [line.split("\t") for line in nbest.out.splitlines()]
    for i, (line, record, one) in enumerate(zip(JSONL_LINES, records, best, strict=True)):
        assert record["src"] == one["src"] == line
        mine = [(row[2], float(row[1])) for row in rows if int(row[0]) == i]
        assert [t["text"] for t in record["nbest"]] == [text for text, _ in mine]
        assert [t["score"] for t in record["nbest"]] == pytest.approx(
            [score for _, score in mine], abs=1e-4)
        assert (record["text"], record["score"]) == (mine[0][0], record["nbest"][0]["score"])
        assert "nbest" not in one and one["text"] == record["text"]
        assert one["score"] == pytest.approx(record["score"], abs=1e-4)
        if not line.strip():
            assert record == {"src": line, "text": "", "score": 0.0,
                              "nbest": [{"text": "", "score": 0.0}]}
    assert [r["text"] for r in best] == plain.out.split("\n")[:-1]
