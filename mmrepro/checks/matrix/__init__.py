"""``mmrepro-matrix``: which MMDetection families train bit-exactly here, measured.

:mod:`.run` trains each family of the zoo twice, with other ``num_workers`` and resumed
from a middle checkpoint, and writes the support matrix; :mod:`.epoch_resume` resumes a
short schedule from every epoch boundary, across the switch hooks.
"""
