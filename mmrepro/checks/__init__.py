"""Checks that compare runs and return results (the command-line tools print them).

One folder per tool, each with its flow (``run.py``) and its verdict (``verdict.py``):

- :mod:`.check`: ``mmrepro-check CONFIG``, is this config reproducible here?
- :mod:`.against`: ``mmrepro-check --against BASELINE``, does this machine reproduce a
  baseline (a training run, or a test run)?
- :mod:`.diff`: ``mmrepro-diff A B``, do two runs match, and if not, why?

What they share lies here: training a config as the checks do (:mod:`.runs`), reading a
run (:mod:`.run_data`, :mod:`.evidence`, :mod:`.evaluations` and the verdict on two test
runs, :mod:`.eval_verdict`), the rounding envelope (:mod:`.envelope`), what real runs do
that a check's runs do not (:mod:`.real_runs`), which recorded differences can change
training (:mod:`.causes`) and what removes each (:mod:`.fixes`, :mod:`.machine_fixes`).
The support matrix (``mmrepro-matrix``: :mod:`.support_matrix`, :mod:`.epoch_resume`)
runs the plain check on every family.
"""
