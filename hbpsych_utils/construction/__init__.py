"""Building the subset: corpus, LLM screening, translations, blinded clinician review rounds,
the review instrument, inter-rater agreement and the subset files (notebooks 01-05)."""
