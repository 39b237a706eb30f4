"""The run's declared structure: the stage graph (``graph``), each stage's output folder
(``stage``), its typed metrics (``metrics``) and whether its outputs are current (``state``)."""
