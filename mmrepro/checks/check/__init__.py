"""``mmrepro-check CONFIG``: train a config twice (resumed, with other workers) and compare.

:mod:`.run` trains and compares the runs, :mod:`.verdict` says whether the config is
reproducible and what removes each cause, :mod:`.nondeterminism` lists PyTorch's and
mmcv's nondeterministic operations.
"""
