"""Which of the served source languages a text is in: LibreTranslate's /detect, and a request's
source `auto` where several served pairs translate into its target (mt.serve.pairs.Pairs.route).

py3langid identifies it: langid.py's naive Bayes model over byte n-grams (140 languages, ISO
639 codes), shipped inside the package, so nothing is downloaded at run time. It is asked only
about the served sources, and loaded once (mt.serve.app loads it as the server starts where
there are two sources to tell apart). A source the model does not know (a toy corpus's `xx`)
is never named, nor another chosen over it; a server of one source language needs no model.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

SAMPLE = 2_000  # characters of a request read to identify it: enough, and a bounded cost


class Identifier:
    """Identifies a text's language among `languages` (the served sources)."""

    def __init__(self, languages: Sequence[str]):
        self.languages = list(languages)
        self.model = None
        self.lock = threading.Lock()

    def load(self):
        """The model, loaded on first use (about a second), restricted to the languages it
        knows of those served."""
        with self.lock:
            if self.model is None:
                from py3langid.langid import MODEL_FILE, LanguageIdentifier

                model = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
                model.set_languages([c for c in self.languages if c in set(model.labels)])
                self.model = model
        return self.model

    def known(self) -> list[str]:
        """The served sources it can tell apart (all of them if there is only one)."""
        if len(self.languages) == 1:
            return self.languages
        return list(self.load().nb_classes)

    def rank(self, text: str, among: Sequence[str] | None = None) -> list[tuple[str, float]]:
        """(language, confidence from 0 to 100), best first, over `among` (None: the served
        sources); empty where the model does not know one of them, which it would never name."""
        among = self.languages if among is None else list(among)
        if len(among) == 1:
            return [(among[0], 100.0)]
        if not among or not set(self.known()).issuperset(among):
            return []
        scores = dict(self.load().rank(text[:SAMPLE]))
        total = sum(scores[c] for c in among) or 1.0  # renormalized over among
        return sorted(((c, round(100 * scores[c] / total, 2)) for c in among),
                      key=lambda x: -x[1])
