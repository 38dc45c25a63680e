"""mmrepro.trace.tracer: the Tracer's hooks and file; its traces read and compared."""
import json
from types import SimpleNamespace

import pytest
import torch
from support.toy_runner import fake_runner
from torch import nn

from mmrepro import trace as T
from mmrepro.trace.fileformat import FORWARD_SKETCH
from mmrepro.trace.sketch import WIDTH


def _hex(tensor, path=''):
    return T.to_hex(T.tensor_digest(tensor, path))


class _Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)

    def forward(self, x):
        return self.bn(self.conv(x)), x.mean()  # a tuple output


class _Net(nn.Module):
    def __init__(self, noise: bool = False) -> None:
        super().__init__()
        self.block = _Block()
        self.shared = nn.Linear(4, 4)
        self.noise = noise

    def forward(self, x):
        feat, _ = self.block(x)
        if self.noise:
            feat = feat + 1e-7 * torch.randn(feat.shape)
        pooled = feat.mean((2, 3))
        return {'loss': self.shared(self.shared(pooled)).square().mean()}  # called twice


def _train(tmp_path, name, noise=False, interval=1, iters=4, seed=0, forward=True,
           clip=False, grads_in_hook=False, sketches=True, compiled=False):
    """Train ``_Net`` traced; ``compiled``: the step (forward to zero_grad) compiled, as
    MMEngine's ``compile`` compiles ``train_step``."""
    torch.manual_seed(seed)
    model = _Net()
    model.noise = noise
    # foreach: torch 2.1's dynamo cannot trace the single-tensor SGD's first momentum step
    optim = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, foreach=True)
    log_dir = tmp_path / name
    log_dir.mkdir()
    runner = fake_runner(model=model, log_dir=str(log_dir), iter=0, epoch=0,
                         optim_wrapper=SimpleNamespace(optimizer=optim),
                         cfg=dict(compile=dict(backend='aot_eager') if compiled else None))
    tracer = T.Tracer(runner, interval, forward=forward, sketches=sketches)
    tracer._grads_in_hook = grads_in_hook  # as for a model wrapper (DDP)
    data = torch.randn(iters, 2, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    hooks_seen = []

    def step(inputs):
        losses = model(inputs)
        losses['loss'].backward()
        if clip:  # scales the gradients in place, as OptimWrapper's clip_grad does
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1e-3)
        optim.step()
        optim.zero_grad()  # gradients are gone before after_train_iter, as in MMEngine
        return losses

    if compiled:
        step = torch.compile(step, backend='aot_eager')
    for i in range(iters):
        runner.iter = i
        tracer.before_train_iter(runner, i)
        hooks_seen.append(len(model.block.conv._forward_hooks))
        grad_hooks = model.block.conv.weight._post_accumulate_grad_hooks or {}
        assert len(grad_hooks) == tracer.traced(i)  # only while an iteration is traced
        losses = step(data[i])
        tracer.after_train_iter(runner, i, losses)
    tracer.close()
    conv = model.block.conv
    assert not conv._forward_hooks and not conv.weight._post_accumulate_grad_hooks
    return str(log_dir / T.TRACE_NAME), hooks_seen


def test_tracer_writes_every_nth_iteration_with_hooks_only_then(tmp_path):
    path, hooks_seen = _train(tmp_path, 'a', interval=2)
    header, lines = T.read_trace(path)
    assert header['interval'] == 2 and header['modules']['block.conv'] == 'Conv2d'
    assert [line['iter'] for line in lines] == [1, 2, 4]  # the first, then every 2nd
    # forward hooks exist only on traced iterations (and the sketches' at the first)
    assert hooks_seen == [2, 1, 0, 1]
    line = lines[1]
    assert list(line['losses']) == ['loss']
    assert float.fromhex(line['losses']['loss']) > 0
    assert list(line['forward'])[:3] == ['block.conv', 'block.bn', 'block']  # finish order
    assert 'shared' in line['forward'] and 'shared#1' in line['forward']  # repeated call
    assert line['forward']['shared'] != line['forward']['shared#1']
    assert list(line['grad'])[:2] == ['shared.bias', 'shared.weight']  # backward order
    assert set(line['grad']) == {n for n, _ in _Net().named_parameters()}
    assert set(line['buffer']) >= {'block.bn.running_mean', 'block.bn.num_batches_tracked'}


def test_tracer_gradients_are_those_of_backward(tmp_path):
    path, _ = _train(tmp_path, 'a', iters=1)
    _, lines = T.read_trace(path)
    torch.manual_seed(0)
    model = _Net()
    data = torch.randn(1, 2, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    model(data[0])['loss'].backward()
    assert lines[0]['grad']['block.conv.weight'] == _hex(model.block.conv.weight.grad)
    assert lines[0]['grad'] == {n: _hex(p.grad) for n, p in model.named_parameters()}
    torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9).step()  # as _train does
    assert lines[0]['weight'] == {n: _hex(p) for n, p in model.named_parameters()}
    assert lines[0]['buffer'] == {n: _hex(b) for n, b in model.named_buffers()}


def test_gradients_are_read_before_clipping(tmp_path):
    path, _ = _train(tmp_path, 'a', iters=1, clip=True)
    clipped = T.read_trace(path)[1][0]
    plain = T.read_trace(_train(tmp_path, 'b', iters=1)[0])[1][0]
    assert clipped['grad'] == plain['grad']  # the digests are those of backward's output
    assert clipped['weight'] != plain['weight']  # the step used the clipped gradients


def test_gradients_read_in_hooks_or_after_backward_agree(tmp_path):
    after = T.read_trace(_train(tmp_path, 'a', clip=True)[0])[1]
    in_hook = T.read_trace(_train(tmp_path, 'b', clip=True, grads_in_hook=True)[0])[1]
    assert after == in_hook
    assert list(after[0]['grad']) == list(in_hook[0]['grad'])  # both in backward order


def test_sketches_are_optional(tmp_path):
    path, hooks_seen = _train(tmp_path, 'a', forward=False, sketches=False)
    lines = T.read_trace(path)[1]
    assert hooks_seen == [0, 0, 0, 0]  # no forward hook at the first iteration either
    assert all('sketch' not in line and FORWARD_SKETCH not in line for line in lines)
    sketched = T.read_trace(_train(tmp_path, 'b', forward=False)[0])[1]
    assert all('sketch' in line for line in sketched) and FORWARD_SKETCH in sketched[0]
    assert [line['step_grad'] for line in lines] == [line['step_grad'] for line in sketched]


def test_forward_outputs_are_optional(tmp_path):
    path, hooks_seen = _train(tmp_path, 'a', forward=False)
    header, lines = T.read_trace(path)
    assert header['forward'] is False and hooks_seen == [1, 0, 0, 0]  # the sketches'
    assert all('forward' not in line for line in lines)
    # the first iteration sketches every module's output, in the order they finished
    first = lines[0][FORWARD_SKETCH]
    assert list(first) == ['block.conv', 'block.bn', 'block', 'shared', 'shared#1', '(model)']
    assert all(len(value) == WIDTH and any(value) for value in first.values())
    assert all(FORWARD_SKETCH not in line for line in lines[1:])
    with_forward = T.read_trace(_train(tmp_path, 'b')[0])
    assert with_forward[0]['forward'] is True
    diff = T.compare_traces(lines, with_forward[1])  # the sections both have are compared
    assert diff.identical and diff.common == [1, 2, 3, 4]
    noisy = T.read_trace(_train(tmp_path, 'c', noise=True, forward=False)[0])[1]
    diff = T.compare_traces(lines, noisy)
    assert diff.iteration == 1 and diff.culprit() == ('grad', 'shared.bias')


def test_compiled_step_is_traced_from_outside_its_graphs(tmp_path, monkeypatch):
    from mmrepro.trace import tracer as tracer_module
    real, compiling = tracer_module._batch, []

    def batch(*args):  # every digest of the trace, and whether dynamo traced it
        compiling.append(torch._dynamo.is_compiling())
        return real(*args)

    monkeypatch.setattr(tracer_module, '_batch', batch)
    path, hooks_seen = _train(tmp_path, 'compiled', compiled=True)
    header, lines = T.read_trace(path)
    assert hooks_seen == [0, 0, 0, 0]  # no forward hook inside the compiled forward
    assert header['compiled'] is True and header['forward'] is False  # though asked for
    assert compiling and not any(compiling)
    eager = T.read_trace(_train(tmp_path, 'eager', forward=False)[0])[1]
    assert all(FORWARD_SKETCH not in line and 'forward' not in line for line in lines)
    for section in ('losses', 'grad', 'step_grad', 'weight', 'buffer', 'sketch'):
        assert [line[section] for line in lines] == [line[section] for line in eager]


def test_tracer_lists_tensors_as_named_parameters_and_buffers(tmp_path):
    model = _Net()
    model.alias = model.shared  # a module reachable twice: listed once, as torch does
    runner = fake_runner(model=model, log_dir=str(tmp_path), iter=0, epoch=0)
    tracer = T.Tracer(runner, 1)
    model.block.bn.running_mean = torch.ones(4)  # replaced after the start: read anew
    for mine, torchs in ((tracer._named('_parameters'), model.named_parameters()),
                         (tracer._named('_buffers'), model.named_buffers())):
        torchs = list(torchs)
        assert [n for n, _ in mine] == [n for n, _ in torchs]
        assert all(a is b for (_, a), (_, b) in zip(mine, torchs, strict=True))
    tracer.close()


def test_bad_forward_flag_is_an_error(tmp_path):
    runner = fake_runner(model=_Net(), log_dir=str(tmp_path), iter=0, epoch=0)
    with pytest.raises(TypeError, match=r"Tracer\(forward='yes'\): expected True or False\."):
        T.Tracer(runner, 1, forward='yes')


def test_compare_traces_names_the_first_diverging_module(tmp_path):
    same_a, _ = _train(tmp_path, 'a')
    same_b, _ = _train(tmp_path, 'b')
    noisy, _ = _train(tmp_path, 'c', noise=True)
    header, lines_a = T.read_trace(same_a)
    diff = T.compare_traces(lines_a, T.read_trace(same_b)[1])
    assert diff.identical and diff.common == [1, 2, 3, 4]
    assert T.describe_diff(diff)[0] == ('bit-identical over iterations 1..4 (4 traced): every '
                                        'loss, forward output, gradient, weight and buffer')
    diff = T.compare_traces(lines_a, T.read_trace(noisy)[1])
    assert not diff.identical and diff.iteration == 1
    # block's outputs are equal; the noise is added in the root module's forward
    assert diff.culprit() == ('forward', 'shared')
    text = '\n'.join(T.describe_diff(diff, header['modules']))
    assert 'first diverging iteration: 1' in text
    assert 'forward output of shared (Linear)' in text


def test_read_trace_errors_name_file_and_line(tmp_path):
    path, _ = _train(tmp_path, 'a')
    rows = open(path).read().splitlines()
    cut = tmp_path / 'cut.jsonl'
    cut.write_text('\n'.join(rows[:-1]) + '\n' + rows[-1][:50])  # killed mid-write
    header, lines = T.read_trace(str(cut))
    assert header['truncated'] and len(lines) == len(rows) - 2
    broken = tmp_path / 'broken.jsonl'
    broken.write_text('\n'.join([rows[0], rows[1][:30], *rows[2:]]) + '\n')
    with pytest.raises(T.TraceError, match=r'broken.jsonl: line 2 is not valid JSON'):
        T.read_trace(str(broken))
    other = tmp_path / 'other.jsonl'
    other.write_text(json.dumps({'iter': 1}) + '\n')
    with pytest.raises(T.TraceError, match='not an mmrepro trace header'):
        T.read_trace(str(other))
    with pytest.raises(T.TraceError, match='no such trace file'):
        T.read_trace(str(tmp_path / 'missing.jsonl'))
