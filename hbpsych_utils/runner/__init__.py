"""Running a profile (the top layer): the command line (``cli``), the plan and its execution
(``run``), one notebook's kernel (``execute``), the profile's references checked at the door
(``checks``) and the run manifest (``manifest``)."""

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
