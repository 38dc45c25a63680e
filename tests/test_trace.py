"""mmrepro.trace: exact digests, the Tracer's hooks and file, comparing traces."""
import glob
import json
import os.path as osp
import types

import numpy as np
import pytest
import torch
from torch import nn

from mmrepro import trace as T
from mmrepro.trace import batching, digests

MASK = (1 << 64) - 1


def _hex(tensor, path=''):
    return T.to_hex(T.tensor_digest(tensor, path))


def _reference(tensor: torch.Tensor) -> int:
    """The digest's definition in numpy integers (meta term excluded)."""
    data = tensor.detach().contiguous().reshape(-1).numpy().view(np.uint8)
    padded = np.zeros(-(-data.size // 8) * 8, dtype=np.uint8)
    padded[:data.size] = data
    words = padded.view('<u8')
    with np.errstate(over='ignore'):
        return int(np.sum(words * digests.multipliers(0, words.size), dtype=np.uint64))


def test_multipliers_are_odd_and_differ_by_position():
    mult = digests.multipliers(0, 3 * 65536 + 5)
    assert np.all(mult & np.uint64(1) == 1)
    assert len(np.unique(mult)) == mult.size
    assert np.array_equal(digests.multipliers(65530, 10), mult[65530:65540])


@pytest.mark.parametrize('numel', [1, 7, 1000, 2 * 65536 * 2 + 3, 2 * 65536 * 9 + 2])
def test_digest_matches_its_definition(numel):
    tensor = torch.randn(numel, generator=torch.Generator().manual_seed(numel))
    meta = digests._meta('', tensor)
    assert (T.tensor_digest(tensor) - meta) & MASK == _reference(tensor)


@pytest.mark.parametrize('dtype', [torch.float32, torch.float16, torch.bfloat16,
                                   torch.float64, torch.int64, torch.uint8])
def test_every_single_bit_flip_changes_the_digest(dtype):
    gen = torch.Generator().manual_seed(0)
    base = (torch.randn(3, 67, generator=gen) * 100).to(dtype)
    raw = base.clone().reshape(-1).view(torch.uint8)
    reference = _hex(base)
    # every bit of the first, a middle and the last element, and random others
    positions = list(range(base.element_size() * 8)) + \
        [raw.numel() * 8 - 1 - b for b in range(base.element_size() * 8)] + \
        torch.randint(0, raw.numel() * 8, (200,), generator=gen).tolist()
    for bit in positions:
        flipped = raw.clone()
        flipped[bit // 8] ^= 1 << (bit % 8)
        assert _hex(flipped.view(dtype).view(base.shape)) != reference, (dtype, bit)


def test_bit_flip_detected_in_every_chunk_of_a_large_tensor():
    row = digests._CHUNK * 2  # float32 elements per row of 64-bit words
    tensor = torch.randn(row * 40 + 5)  # past the one-dot head: 40 rows and a tail
    assert tensor.numel() // 2 > digests._HEAD
    reference = _hex(tensor)
    for index in (0, row - 1, row, row * 7 + 17, row * 39 + 1, tensor.numel() - 1):
        flipped = tensor.clone()
        flipped.view(torch.int32)[index] ^= 1
        assert _hex(flipped) != reference


def test_permutations_are_detected():
    gen = torch.Generator().manual_seed(1)
    tensor = torch.randn(64, 64, generator=gen)
    reference = _hex(tensor)
    swapped = tensor.clone().reshape(-1)
    swapped[[3, 2000]] = swapped[[2000, 3]]
    assert _hex(swapped.reshape(64, 64)) != reference
    assert _hex(tensor.reshape(-1)[torch.randperm(64 * 64, generator=gen)].reshape(64, 64)) \
        != reference
    assert _hex(tensor.t().contiguous()) != reference  # same shape, elements moved
    assert _hex(tensor.flip(0)) != reference


def test_digest_depends_on_bits_dtype_shape_not_on_layout():
    tensor = torch.arange(12.).reshape(3, 4)
    assert _hex(tensor.t()) == _hex(tensor.t().contiguous())  # logical order
    assert _hex(tensor[:, 1:3]) == _hex(tensor[:, 1:3].clone())  # strided view
    assert _hex(tensor) != _hex(tensor.reshape(4, 3))
    assert _hex(tensor) != _hex(tensor.double())
    assert _hex(torch.zeros(4)) != _hex(torch.zeros(4, dtype=torch.int32))
    assert _hex(torch.tensor([0.0])) != _hex(torch.tensor([-0.0]))  # bits, not values
    assert _hex(torch.zeros(0)) != _hex(torch.zeros(0, 3))
    assert _hex(tensor) == _hex(tensor.clone())
    assert _hex(tensor, 'a') != _hex(tensor, 'b')


def test_digest_does_not_depend_on_thread_count():
    tensor = torch.randn(65536 * 5)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = _hex(tensor)
        torch.set_num_threads(max(threads, 2))
        assert _hex(tensor) == one
    finally:
        torch.set_num_threads(threads)


def test_batched_digests_equal_one_by_one():
    """Every path of the batched digest (small, whole rows, others) gives the same bits."""
    gen = torch.Generator().manual_seed(3)
    big = torch.randn(digests._CHUNK * 2 * 20, generator=gen)  # whole 256-word rows
    tensors = [
        torch.randn(64, generator=gen),  # small, whole words
        torch.randn(27, generator=gen),  # small, a half word at the end
        torch.tensor(5),  # 0-d int64
        big.reshape(40, -1),  # rows
        torch.randn(digests._CHUNK * 2 * 9 + 6, generator=gen),  # big with a partial row
        big.reshape(40, -1).t(),  # not contiguous
        torch.randn(4096, generator=gen).half(),  # small at the size limit
        torch.randn(digests._HEAD * 2 + 2, generator=gen),  # just past the head
        torch.zeros(0),
        torch.rand(300, generator=gen) > 0.5,  # bool
        big[2:digests._CHUNK * 2 + 2],  # offset by 8 bytes: aligned, in place
        big[1:digests._CHUNK * 2 + 1],  # offset by 4 bytes: copied
    ]
    expected = [int(digests._bits_digest(t)) for t in tensors]
    assert digests._bits_digests(tensors).tolist() == expected
    assert digests._bits_digests(tensors[::-1]).tolist() == expected[::-1]
    assert digests._bits_digests([tensors[3]] * 3).tolist() == [expected[3]] * 3
    assert digests._bits_digests([]).tolist() == []


def test_nested_outputs():
    a, b = torch.randn(4), torch.randn(2, 3)
    base = T.to_hex(batching.digest((a, [b, {'x': a}])))
    assert T.to_hex(batching.digest((a.clone(), [b.clone(), {'x': a.clone()}]))) == base
    changed = b.clone()
    changed[1, 2] = changed[1, 2].nextafter(torch.tensor(10.))
    assert T.to_hex(batching.digest((a, [changed, {'x': a}]))) != base
    assert T.to_hex(batching.digest((a, [b, {'y': a}]))) != base  # keys count
    assert T.to_hex(batching.digest([b, a])) != T.to_hex(batching.digest([a, b]))  # order counts
    assert T.to_hex(batching.digest({'p': a, 'q': b})) == \
        T.to_hex(batching.digest({'q': b, 'p': a}))
    assert batching.digest(None) is None and batching.digest(['text', 3]) is None


def test_data_elements_digest_numbers_not_paths():
    from mmdet.structures import DetDataSample
    from mmengine.structures import InstanceData

    def sample(path, flip, box):
        data = DetDataSample(metainfo=dict(img_path=path, flip=flip, scale_factor=(1.5, 2.0)))
        data.gt_instances = InstanceData(bboxes=torch.tensor([box]), labels=torch.tensor([1]))
        return data

    base = T.to_hex(batching.digest(sample('/a/1.png', False, [1., 2., 3., 4.])))
    assert T.to_hex(batching.digest(sample('/elsewhere/1.png', False, [1., 2., 3., 4.]))) == base
    assert T.to_hex(batching.digest(sample('/a/1.png', True, [1., 2., 3., 4.]))) != base
    assert T.to_hex(batching.digest(sample('/a/1.png', False, [1., 2., 3., 5.]))) != base


# ------------------------------------------------------------------------- Tracer
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
           clip=False, grads_in_hook=False):
    torch.manual_seed(seed)
    model = _Net()
    model.noise = noise
    optim = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    log_dir = tmp_path / name
    log_dir.mkdir()
    runner = types.SimpleNamespace(model=model, log_dir=str(log_dir), iter=0, epoch=0)
    tracer = T.Tracer(runner, interval, forward=forward)
    tracer._grads_in_hook = grads_in_hook  # as for a model wrapper (DDP)
    data = torch.randn(iters, 2, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    hooks_seen = []
    for i in range(iters):
        runner.iter = i
        tracer.before_train_iter(runner, i)
        hooks_seen.append(len(model.block.conv._forward_hooks))
        losses = model(data[i])
        losses['loss'].backward()
        if clip:  # scales the gradients in place, as OptimWrapper's clip_grad does
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1e-3)
        optim.step()
        optim.zero_grad()  # gradients are gone before after_train_iter, as in MMEngine
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
    assert hooks_seen == [1, 1, 0, 1]  # forward hooks exist only on traced iterations
    line = lines[1]
    assert list(line['losses']) == ['loss']
    assert float.fromhex(line['losses']['loss']) > 0
    assert list(line['forward'])[:3] == ['block.conv', 'block.bn', 'block']  # finish order
    assert 'shared' in line['forward'] and 'shared#1' in line['forward']  # repeated call
    assert line['forward']['shared'] != line['forward']['shared#1']
    assert list(line['grad'])[:2] == ['shared.bias', 'shared.weight']  # backward order
    assert set(line['grad']) == {n for n, _ in _Net().named_parameters()}
    assert set(line['buffer']) >= {'block.bn.running_mean', 'block.bn.num_batches_tracked'}


def test_traced_steps_are_dense_below_the_interval_then_every_interval():
    from mmrepro.trace.steps import traced_step
    assert [s for s in range(1, 130) if traced_step(s, 50)] == [1, 2, 4, 8, 16, 32, 50, 100]
    assert [s for s in range(1, 10) if traced_step(s, 1)] == list(range(1, 10))
    assert [s for s in range(1, 13) if traced_step(s, 3)] == [1, 2, 3, 6, 9, 12]


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


def test_forward_outputs_are_optional(tmp_path):
    path, hooks_seen = _train(tmp_path, 'a', forward=False)
    header, lines = T.read_trace(path)
    assert header['forward'] is False and hooks_seen == [0, 0, 0, 0]
    assert all('forward' not in line for line in lines)
    with_forward = T.read_trace(_train(tmp_path, 'b')[0])
    assert with_forward[0]['forward'] is True
    diff = T.compare_traces(lines, with_forward[1])  # the sections both have are compared
    assert diff.identical and diff.common == [1, 2, 3, 4]
    noisy = T.read_trace(_train(tmp_path, 'c', noise=True, forward=False)[0])[1]
    diff = T.compare_traces(lines, noisy)
    assert diff.iteration == 1 and diff.culprit() == ('grad', 'shared.bias')


def test_tracer_lists_tensors_as_named_parameters_and_buffers(tmp_path):
    model = _Net()
    model.alias = model.shared  # a module reachable twice: listed once, as torch does
    runner = types.SimpleNamespace(model=model, log_dir=str(tmp_path), iter=0, epoch=0)
    tracer = T.Tracer(runner, 1)
    model.block.bn.running_mean = torch.ones(4)  # replaced after the start: read anew
    for mine, torchs in ((tracer._named('_parameters'), model.named_parameters()),
                         (tracer._named('_buffers'), model.named_buffers())):
        torchs = list(torchs)
        assert [n for n, _ in mine] == [n for n, _ in torchs]
        assert all(a is b for (_, a), (_, b) in zip(mine, torchs, strict=True))
    tracer.close()


def test_bad_forward_flag_is_an_error(tmp_path):
    runner = types.SimpleNamespace(model=_Net(), log_dir=str(tmp_path), iter=0, epoch=0)
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


def test_traces_of_other_versions_compare_losses_only():
    same = {'version': T.TRACE_VERSION}
    assert T.comparable_sections(same, dict(same)) == (('losses', 'data', *T.SECTIONS), None)
    sections, reason = T.comparable_sections(same, {'version': 1})
    assert sections == ('losses',)
    assert reason == (f'trace versions differ ({T.TRACE_VERSION} vs 1: written by different '
                      'mmrepro versions, whose digests are not comparable); comparing loss '
                      'values only')
    line = dict(iter=1, losses={'loss': '0x1.0p+0'}, grad={'w': '1'}, weight={'w': '2'})
    other = dict(line, grad={'w': 'f'})
    diff = T.compare_traces([line], [other], sections)
    assert diff.identical and diff.compared == ['losses']
    assert T.describe_diff(diff)[0] == 'bit-identical over iteration 1: every loss'
    assert not T.compare_traces([line], [other]).identical


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


@pytest.mark.parametrize('kwargs, error, message', [
    (dict(trace_interval=-1), ValueError,
     r'ReproducibilityHook\(trace_interval=-1\): expected an int >= 0 \(0 turns the trace '
     r'off, N records every N iterations\)\.'),
    (dict(trace_interval=True), ValueError, r'ReproducibilityHook\(trace_interval=True\)'),
    (dict(trace_forward=1), TypeError,
     r'ReproducibilityHook\(trace_forward=1\): expected True or False\.'),
])
def test_bad_hook_arguments_are_errors(kwargs, error, message):
    from mmrepro.hooks import ReproducibilityHook
    with pytest.raises(error, match=message):
        ReproducibilityHook(**kwargs)


def _fixed_tensors():
    a = (torch.arange(6000, dtype=torch.float64).reshape(60, 100) * 0.37).float()
    return dict(f32=a, f16=a[:7, :9].half(), i64=torch.arange(-50, 50, dtype=torch.int64),
                strided=a.t()[::3], bool=a[:3, :5] > 3.0, empty=torch.zeros(0, 3))


def test_digests_of_fixed_tensors_are_pinned():
    """The values trace format 2 has always given (computed before trace/ was split)."""
    pinned = dict(f32='4ccc40d398fc3bae', f16='21d6b3e9ce5ce33f', i64='ee914f30ec219dbe',
                  strided='b14c0b637c069344', bool='ad40cda49bff957b', empty='9718f27529b79bf2')
    tensors = _fixed_tensors()
    assert {k: T.to_hex(T.tensor_digest(t, 'x')) for k, t in tensors.items()} == pinned
    nested = (tensors['f32'], [tensors['i64'], {'y': tensors['f16'], 'n': 3, 'f': 0.5}])
    assert T.to_hex(batching.digest(nested)) == 'a01b0b130dd7d728'


@pytest.mark.slow
def test_the_hook_traces_by_default_and_reruns_trace_alike(runs):
    from mmrepro.hooks import ReproducibilityHook
    assert ReproducibilityHook().trace_interval == 50
    traces = []
    for tag in ('base', 'rerun'):
        (path,) = glob.glob(osp.join(runs.get('retinanet', tag), '*', T.TRACE_NAME))
        traces.append(T.read_trace(path))
    (header, lines), (_, again) = traces
    # 24 optimizer steps: the dense early steps below the interval of 50
    assert header['interval'] == 50 and header['points'] == 'dense'
    assert [line['iter'] for line in lines] == [1, 2, 4, 8, 16]
    assert [line['step'] for line in lines] == [1, 2, 4, 8, 16]
    assert len(lines[0]['grad']) == 81 and lines == again
    # the whole step: 2 samples, the loss of its one micro-batch, the applied gradients
    assert len(lines[0]['step_data']) == 2 and set(lines[0]['step_grad']) == set(
        lines[0]['grad'])
    assert lines[0]['step_losses']['0.loss'] == lines[0]['losses']['loss']
