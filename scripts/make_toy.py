"""Generate the toy English->German corpus shipped in data/toy (seeded, reproducible).

Sentences like "Yesterday we bought twenty one red cats." -> "Gestern kauften wir ein und
zwanzig rote Katzen." The task needs reordering twice: German puts units before tens
("ein und zwanzig") and moves the verb before the subject after a time adverb (verb second).

    python scripts/make_toy.py [--out data/toy] [--train 6000] [--dev 300] [--seed 7]
"""

import argparse
import random
from pathlib import Path

SUBJECTS = [("I", "ich", 0), ("you", "du", 1), ("we", "wir", 2), ("they", "sie", 3)]
# English present, English past, German present by person, German past by person.
VERBS = [
    ("see", "saw", ["sehe", "siehst", "sehen", "sehen"], ["sah", "sahst", "sahen", "sahen"]),
    ("buy", "bought", ["kaufe", "kaufst", "kaufen", "kaufen"],
     ["kaufte", "kauftest", "kauften", "kauften"]),
    ("have", "had", ["habe", "hast", "haben", "haben"], ["hatte", "hattest", "hatten", "hatten"]),
    ("need", "needed", ["brauche", "brauchst", "brauchen", "brauchen"],
     ["brauchte", "brauchtest", "brauchten", "brauchten"]),
]
ADJECTIVES = [("", ""), ("red", "rote"), ("small", "kleine"), ("old", "alte"), ("new", "neue"),
              ("big", "große"), ("green", "grüne")]
NOUNS = [("cats", "Katzen"), ("dogs", "Hunde"), ("books", "Bücher"), ("houses", "Häuser"),
         ("apples", "Äpfel"), ("cars", "Autos"), ("birds", "Vögel"), ("chairs", "Stühle")]

EN_ONES = "zero one two three four five six seven eight nine".split()
EN_TEENS = "ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen".split()
EN_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
DE_ONES = "null eins zwei drei vier fünf sechs sieben acht neun".split()
DE_TEENS = "zehn elf zwölf dreizehn vierzehn fünfzehn sechzehn siebzehn achtzehn neunzehn".split()
DE_TENS = "_ _ zwanzig dreißig vierzig fünfzig sechzig siebzig achtzig neunzig".split()


def english_number(n: int) -> str:
    h, rest = divmod(n, 100)
    words = [EN_ONES[h], "hundred"] if h else []
    if rest >= 20:
        words += [EN_TENS[rest // 10]] + ([EN_ONES[rest % 10]] if rest % 10 else [])
    elif rest >= 10:
        words.append(EN_TEENS[rest - 10])
    elif rest:
        words.append(EN_ONES[rest])
    return " ".join(words)


def german_number(n: int) -> str:
    h, rest = divmod(n, 100)
    words = ["ein" if h == 1 else DE_ONES[h], "hundert"] if h else []
    if rest >= 20:
        u = rest % 10
        words += (["ein" if u == 1 else DE_ONES[u], "und"] if u else []) + [DE_TENS[rest // 10]]
    elif rest >= 10:
        words.append(DE_TEENS[rest - 10])
    elif rest:
        words.append(DE_ONES[rest])
    return " ".join(words)


def sentence(rng: random.Random) -> tuple[str, str]:
    en_subj, de_subj, person = rng.choice(SUBJECTS)
    en_pres, en_past, de_pres, de_past = rng.choice(VERBS)
    en_adj, de_adj = rng.choice(ADJECTIVES)
    en_noun, de_noun = rng.choice(NOUNS)
    n = rng.randint(2, 999)
    en_obj = " ".join(w for w in (english_number(n), en_adj, en_noun) if w)
    de_obj = " ".join(w for w in (german_number(n), de_adj, de_noun) if w)
    when = rng.choice(["", "today", "yesterday"])
    if when == "":
        en, de = f"{en_subj} {en_pres} {en_obj}.", f"{de_subj} {de_pres[person]} {de_obj}."
    else:
        en_verb, de_verb = ((en_past, de_past[person]) if when == "yesterday"
                            else (en_pres, de_pres[person]))
        de_when = "gestern" if when == "yesterday" else "heute"
        en, de = f"{when} {en_subj} {en_verb} {en_obj}.", f"{de_when} {de_verb} {de_subj} {de_obj}."
    return en[0].upper() + en[1:], de[0].upper() + de[1:]


def generate(n_train: int, n_dev: int, seed: int) -> dict[str, list[tuple[str, str]]]:
    """Distinct pairs, split so that no validation or test source occurs in training."""
    rng = random.Random(seed)
    seen: dict[str, str] = {}
    while len(seen) < n_train + 2 * n_dev:
        en, de = sentence(rng)
        seen.setdefault(en, de)
    pairs = list(seen.items())
    return {"train": pairs[:n_train], "val": pairs[n_train:n_train + n_dev],
            "test": pairs[n_train + n_dev:]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("data/toy"))
    ap.add_argument("--train", type=int, default=6000)
    ap.add_argument("--dev", type=int, default=300, help="sentences in each of val and test")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for split, pairs in generate(args.train, args.dev, args.seed).items():
        for lang, col in (("en", 0), ("de", 1)):
            text = "".join(p[col] + "\n" for p in pairs)
            (args.out / f"toy.{split}.{lang}").write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
