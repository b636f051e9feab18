"""mt/train/lineage.py on plain records: a chain is followed back to the base checkpoint (an
average through its newest input), a checkpoint without a lineage ends it as "unknown", and
format_chain writes it on one line. `mt info` of real runs is in test_commands_info.py."""

from mt.train.lineage import averaged, chain, format_chain


def test_a_chain_goes_back_to_the_base_through_the_newest_input_of_an_average():
    data = {"train": "data/toy/toy.train", "fingerprint": "toy.train.en-de.abc", "mix": []}
    base = {"how": "trained", "data": data, "from": []}
    tuned = {"how": "fine-tuned", "data": data,
             "from": [{"sha256": "b" * 64, "step": 6, "path": "base/best.pt", "lineage": base}]}
    inputs = [{"sha256": f"{c}" * 64, "step": s, "path": f"child/ckpt.{s}.pt", "lineage": tuned}
              for c, s in (("c", 4), ("d", 5))]
    links = chain(averaged(inputs), "e" * 64, 5)
    assert [link["how"] for link in links] == ["trained", "fine-tuned", "averaged"]
    assert [(link["sha256"][0], link["step"]) for link in links] == [("b", 6), ("d", 5),
                                                                    ("e", 5)]
    assert links[-1]["averaged"] == [4, 5] and links[0]["train"] == data["train"]
    assert format_chain(links) == (
        f"trained on {data['train']} (step 6, sha256 {'b' * 12}) -> fine-tuned on "
        f"{data['train']} (step 5, sha256 {'d' * 12}) -> averaged steps 4, 5 (step 5, sha256 "
        f"{'e' * 12})")
    old = {**tuned, "from": [{"sha256": "a" * 64, "step": 3, "path": "old.pt", "lineage": None}]}
    assert chain(old, None, 7)[0] == {"how": "unknown", "sha256": "a" * 64, "step": 3}
    assert format_chain(chain(None, None, 7)) == "no lineage recorded (step 7)"
