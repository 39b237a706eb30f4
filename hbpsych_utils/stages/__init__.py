"""One entry point per notebook: ``sNN_<name>.run(run, params) -> StageResult``.

A notebook is a chapter: it states what and why, takes its parameters, calls its stage's
``run`` and displays the tables, figures and findings that come back. Everything the chapter
computes, including which mode it runs in and the sentences of "What we found", happens in
these modules, where it is tested; the modules themselves only orchestrate the science of
:mod:`hbpsych_utils.construction`, :mod:`hbpsych_utils.evaluation` and
:mod:`hbpsych_utils.reporting`. ``base`` holds the result type and the run context.
"""
