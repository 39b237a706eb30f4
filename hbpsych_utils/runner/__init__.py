"""Running a profile (the top layer): the command line (``cli``); the run (``run``, started by
``orchestrate``): what runs and why (``plan``), the notebooks up to ``--jobs`` at a time
(``schedule``), one notebook (``step``) and its kernel (``execute``), what is recorded as each
ends (``record``), the book at the end (``book_step``), how the run ended (``result``); the
profile's references checked at the door (``checks``) and the run manifest (``manifest``)."""

from hbpsych_utils.runner.cli import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_LOCKED,
    EXIT_USAGE,
    LAUNCHER_ENV,
    main,
)
from hbpsych_utils.runner.run import RunInterrupted, RunResult, run_profile

__all__ = ["EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_LOCKED", "EXIT_USAGE", "LAUNCHER_ENV",
           "RunInterrupted", "RunResult", "main", "run_profile"]
