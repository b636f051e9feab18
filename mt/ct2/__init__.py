"""The optional CTranslate2 dependency, in one room: export to its format, and search with it."""
