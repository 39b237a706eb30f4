"""Infrastructure every stage shares: profiles (``config``), paths, external artifacts
(``sources``), file-format validation (``records``), JSON Lines (``jsonl``), a stage's output
folder (``stage``), the run manifest and the papermill runner. Nothing here knows the science."""
