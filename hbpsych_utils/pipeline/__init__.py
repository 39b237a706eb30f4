"""The run's declared structure: each stage's node and profile section (``nodes``, what a node
is made of: ``spec``), the stage graph they make (``graph``), the profile assembled from it
(``profiles``), each stage's typed metrics (``metrics``), its output folder (``stage``),
whether its outputs are current (``state``) and the docs' parts written from the graph
(``docs_blocks``)."""
