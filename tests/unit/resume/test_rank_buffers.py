"""broadcast_buffers: rank 0's buffers (model and EMA) on every rank, two real gloo ranks."""
from types import SimpleNamespace

import torch
from support.spawn_workers import buffers_worker, spawn_ranks

from mmrepro.resume.rank_buffers import broadcast_buffers


def test_every_rank_gets_rank0_buffers_and_keeps_its_weights(tmp_path):
    results = spawn_ranks(buffers_worker, 2, str(tmp_path / 'store'))
    rank0, rank1 = dict(results[0]), dict(results[1])
    assert rank0['before'] != rank1['before']  # BatchNorm statistics differed per rank
    assert rank0['after'] == rank0['before']  # rank 0 receives nothing
    assert rank1['after'] == rank0['before']
    assert rank1['ema'] == rank0['ema']
    # 3 BatchNorm buffers of the model; 3 of the EMA copy and its step count
    assert rank0['sent'] == rank1['sent'] == 7
    assert rank0['weights_kept'] and rank1['weights_kept']


def test_one_process_sends_nothing():
    model = torch.nn.BatchNorm1d(2)
    model(torch.randn(4, 2))
    before = [b.clone() for b in model.buffers()]
    assert broadcast_buffers(SimpleNamespace(model=model, hooks=[])) == 0
    assert all(torch.equal(a, b) for a, b in zip(before, model.buffers(), strict=True))
