"""What turns a batch of source ids into hypotheses (docs/development.md, "The translate path").

  request      SearchRequest (what a search is asked), Hypothesis (what it gives)
  engines      the Engine protocol, its Capabilities, checked in one place; mt's ModelEngine
               (CTranslate2's engine is mt.ct2.search)
  search       the one step loop over anything Decodable, a Rule plugged in
  rules        greedy, sampling and beam search as rules, and RULES, their registry
  sampling     top-k and top-p draws, seeded per sentence
  constraints  what no search may choose: length limits, forced prefixes, repeated n-grams
  lexical      target terms that beam search must hold (a glossary's)
  record       what a search records of each output, as it goes (attention, trace)
  scores       length penalties and teacher-forced scores
  precision    the model in decode.dtype: bf16 and int8 copies, the CPU weight layout, auto
  packed       bf16 weights packed once for oneDNN's kernels (a CPU with bf16 in hardware)
  align        word alignments from cross-attention
"""
