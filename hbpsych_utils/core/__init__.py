"""Infrastructure every layer shares: profiles (``config``), paths, external artifacts
(``sources``), file-format validation (``records``), JSON Lines (``jsonl``), strict YAML
(``yaml_loader``), atomic writes (``writes``), API keys kept out of what is written
(``secrets``), the run lock (``runlock``) and text made safe in a page (``escape``). The lowest
layer after ``study``: nothing here knows the science or the stages."""
