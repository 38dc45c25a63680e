"""What a fresh training process here would record of its environment.

``python -m mmrepro.checks.against.probe`` prints, as JSON, the run record's sections that
describe the machine and the software (versions, devices, the environment variables
that change results, PyTorch's numerics flags, the hardware and libraries that change
rounding, the code), read in a new interpreter started with the environment a training
process of the check would get, so that nothing the calling process changed (thread
counts, flags) leaks into the prediction (:func:`probe`).
"""
from __future__ import annotations

import json
import os
import os.path as osp
import subprocess
import sys
from typing import Any, Dict, Mapping, Optional

from ...record.run_record import environment_facts


def facts() -> Dict[str, Any]:
    """This process's facts (call it in a fresh interpreter: :func:`probe`):
    :func:`~mmrepro.record.run_record.environment_facts`."""
    return environment_facts()


def probe(env: Optional[Mapping[str, str]] = None) -> Dict[str, Any]:
    """:func:`facts` of a new interpreter started with ``env`` (this process's by default).

    Raises:
        RuntimeError: The interpreter failed (its last lines are in the message).
    """
    root = osp.dirname(osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))
    variables = dict(os.environ if env is None else env)
    if osp.basename(root) not in ('site-packages', 'dist-packages'):  # a source tree
        variables['PYTHONPATH'] = os.pathsep.join(
            p for p in (root, variables.get('PYTHONPATH')) if p)
    failed = 'reading this environment in a new interpreter failed: '
    try:
        proc = subprocess.run([sys.executable, '-m', 'mmrepro.checks.against.probe'],
                              env=variables, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired as err:
        raise RuntimeError(f'{failed}no answer within {err.timeout:.0f} s') from None
    if proc.returncode != 0:
        raise RuntimeError(failed + ' | '.join(proc.stderr.strip().splitlines()[-3:]))
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        raise RuntimeError(f'{failed}it printed no facts ({proc.stdout[-200:]!r})') from None


if __name__ == '__main__':
    print(json.dumps(facts(), default=str))
