"""``mmrepro-check [CONFIG] --against BASELINE``: does this machine reproduce a baseline?

:mod:`.run` compares before training (:mod:`.predicted`, with the environment read by
:mod:`.probe`), trains the baseline's steps here (:mod:`.span`) and compares them step
by step; :mod:`.verdict` judges the comparison. A baseline that is a test run is tested
again here (:mod:`.retest`).
"""
