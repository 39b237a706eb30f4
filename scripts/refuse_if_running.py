"""Refuse a second run into the same outputs folder before run_all.sh checks its environment.

run_all.sh calls this with its own arguments and whichever Python 3 it finds first, before the
environment is set up or checked. It reads the arguments and asks for the run lock exactly as
``python -m hbpsych_utils run`` does (``hbpsych_utils.runner.cli.lock_refusal``), with this
checkout's package and the standard library only. Exit 3 with the run's own refusal when
another run holds the folder; otherwise exit 0, also whenever it cannot tell (an interpreter
too old for the package, say): the run itself asks again once its environment is ready.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
try:
    from hbpsych_utils.runner.cli import EXIT_LOCKED, lock_refusal

    refusal = lock_refusal(sys.argv[1:])
except Exception:  # whatever it is, the run itself checks again
    refusal = None
if refusal:
    print(refusal, file=sys.stderr)
    sys.exit(EXIT_LOCKED)
