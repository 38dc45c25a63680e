"""The per-attempt store of torchrun launches."""
import datetime

import pytest
import torch.distributed as torch_dist

from mmrepro.patches import distributed


def test_attempt_store_prefixes_the_agent_store_by_restart_count(monkeypatch):
    server = torch_dist.TCPStore('127.0.0.1', 0, is_master=True,
                                 timeout=datetime.timedelta(seconds=10))
    monkeypatch.setenv('TORCHELASTIC_USE_AGENT_STORE', 'True')
    monkeypatch.setenv('TORCHELASTIC_RESTART_COUNT', '3')
    monkeypatch.setenv('MASTER_ADDR', '127.0.0.1')
    monkeypatch.setenv('MASTER_PORT', str(server.port))
    monkeypatch.setenv('RANK', '1')
    monkeypatch.setenv('WORLD_SIZE', '2')
    kwargs = distributed.attempt_store_kwargs(datetime.timedelta(seconds=10))
    assert (kwargs['rank'], kwargs['world_size']) == (1, 2)
    kwargs['store'].set('rank_1', 'here')
    assert server.get('/worker/attempt_3/rank_1') == b'here'


@pytest.mark.parametrize('agent_store', [None, 'False'])
def test_no_attempt_store_without_torchruns_agent_store(monkeypatch, agent_store):
    if agent_store is None:
        monkeypatch.delenv('TORCHELASTIC_USE_AGENT_STORE', raising=False)
    else:
        monkeypatch.setenv('TORCHELASTIC_USE_AGENT_STORE', agent_store)
    assert distributed.attempt_store_kwargs() == {}
