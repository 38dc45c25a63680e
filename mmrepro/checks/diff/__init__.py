"""``mmrepro-diff A B``: do two runs (or two test runs) match, and if not, why?

:mod:`.run` reads and compares the runs, :mod:`.verdict` judges what was compared and
ranks the recorded causes, :mod:`.rounding` measures the rounding envelope where only
the numbers differ.
"""
