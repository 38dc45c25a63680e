"""The restricted unpickler (torch < 2.6): MMEngine checkpoints load, anything else fails.

``safe_load`` uses it on torch 2.1 - 2.5 (the floor stack); it is called directly here so
that both stacks test it.
"""
import os
import pickle
from collections import Counter

import numpy as np
import pytest
import torch
from mmengine.logging.history_buffer import HistoryBuffer
from support.checkpoints import checkpoint_like

from mmrepro.resume.checkpoint_io import CheckpointLoadError, safe_load
from mmrepro.resume.safe_unpickler import has_safe_globals, torch_load_restricted


class _RunsACommand:
    def __init__(self, target: str) -> None:
        self.target = target

    def __reduce__(self):
        return os.system, (f'touch {self.target}',)


class _ReachesAnAttribute:
    def __reduce__(self):
        return getattr, (np.ndarray, 'tofile')


def test_loads_what_mmengine_checkpoints_hold(tmp_path):
    path = str(tmp_path / 'ckpt.pth')
    torch.save(checkpoint_like(), path)
    loaded = torch_load_restricted(path, 'cpu', mmap=False)
    assert torch.equal(loaded['state_dict']['w'], torch.arange(6.).reshape(2, 3))
    buffer = loaded['message_hub']['log_scalars']['loss']
    assert isinstance(buffer, HistoryBuffer) and buffer.current() == 0.25
    assert buffer.mean() == 0.375
    runtime = loaded['message_hub']['runtime_info']
    assert runtime['arr'].dtype == np.int32 and runtime['arr'].tolist() == [0, 1, 2, 3]
    assert runtime['names'] == {'a', 'b'} and runtime['counts'] == Counter(a=2)
    assert loaded['meta']['shape'] == torch.Size([2, 3])
    assert torch_load_restricted(path, 'cpu', mmap=True)['state_dict']['n'].item() == 3


def test_refuses_a_global_outside_the_allow_list(tmp_path):
    path, target = str(tmp_path / 'evil.pth'), tmp_path / 'pwned'
    torch.save(dict(state_dict={}, payload=_RunsACommand(str(target))), path)
    with pytest.raises(pickle.UnpicklingError, match=r'^Unsupported global: GLOBAL '
                       r'posix\.system was not an allowed global by default\.$'):
        torch_load_restricted(path, 'cpu', mmap=False)
    assert not target.exists()
    with pytest.raises(CheckpointLoadError,
                       match=r'holds an object mmrepro does not load: .*posix\.system'):
        safe_load(path)  # safe_globals (torch >= 2.6) or this unpickler: the same refusal
    assert not target.exists()


def test_refuses_getattr_beyond_history_buffer_statistics(tmp_path):
    path = str(tmp_path / 'attr.pth')
    torch.save(dict(x=_ReachesAnAttribute()), path)
    with pytest.raises(pickle.UnpicklingError,
                       match=r"getattr\(<class 'numpy\.ndarray'>, 'tofile'\) is not an "
                       'attribute MMEngine checkpoints use'):
        torch_load_restricted(path, 'cpu', mmap=False)


def test_safe_load_uses_it_exactly_where_safe_globals_cannot_take_the_list():
    from torch.torch_version import TorchVersion
    assert has_safe_globals() is (TorchVersion(torch.__version__) >= '2.6')
