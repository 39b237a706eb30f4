"""One module per chapter (a package for a chapter split along its parts): ``sNN_<name>.start``
with every parameter of the notebook's parameters cell by name, its resolver, then the stage's
science steps in the order its notebook calls them, ``metrics``, ``write`` and ``findings``.
``base.run_chapter`` runs a chapter's own calls in this process, for scripts and tests.

A notebook is a chapter: it states what and why, takes its parameters, and makes these calls by
name, displaying what each returns. Everything a chapter computes, including which mode it
runs in, what a mode cannot produce and the sentences of "What we found", happens in these
modules, where it is tested; they orchestrate the science of :mod:`hbpsych_utils.construction`,
:mod:`hbpsych_utils.evaluation` and :mod:`hbpsych_utils.reporting`, and never import one
another. ``base`` holds the run a chapter starts from (``StageRun``) and the writing of its
outputs.
"""
