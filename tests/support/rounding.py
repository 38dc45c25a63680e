"""What the rounding tests share: running the two tools, and the verdicts they print."""
import functools
import re

from mmrepro.cli.check_repro import main as check_main
from mmrepro.cli.repro_diff import main as diff_main
from support.cli import run_main

#: ``mmrepro-check`` and ``mmrepro-diff`` run in this process: ``(code, out, err)``.
check = functools.partial(run_main, check_main)
diff = functools.partial(run_main, diff_main)
#: The verdict of a run within the envelope, with its distance and step.
EQUIVALENT = re.compile(r'not bitwise, but equivalent within rounding \(distance '
                        r'(\S+)x the envelope at step (\d+)\)')
#: The verdict of a run beyond it.
BEYOND = re.compile(r'differs beyond rounding from step (\d+) \(distance (\S+)x the '
                    r'envelope\), ([^;\n]*)')
