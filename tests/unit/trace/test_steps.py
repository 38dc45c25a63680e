"""mmrepro.trace.steps: which optimizer steps are traced, and the step recorder."""
import copy

import torch
from mmengine.optim import OptimWrapper
from torch import nn

from mmrepro import trace as T
from mmrepro.trace.sketch import sketch
from mmrepro.trace.steps import SKETCHED_STEPS, StepRecorder

MASK = (1 << 64) - 1


def test_traced_steps_are_dense_below_the_interval_then_every_interval():
    from mmrepro.trace.steps import traced_step
    assert [s for s in range(1, 130) if traced_step(s, 50)] == [1, 2, 4, 8, 16, 32, 50, 100]
    assert [s for s in range(1, 10) if traced_step(s, 1)] == list(range(1, 10))
    assert [s for s in range(1, 13) if traced_step(s, 3)] == [1, 2, 3, 6, 9, 12]


# ------------------------------------------------------------------- StepRecorder
def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 1))


def _loss(model):
    inputs = torch.linspace(-1, 1, 20).reshape(5, 4)
    return model(inputs).square().mean() * 100


def _hexes(grads):
    """The step_grad digests of a pending batch, as the trace line writes them."""
    return {name: T.to_hex((int(bits) + meta) & MASK)
            for (section, name), meta, bits in zip(grads.keys, grads.metas,
                                                   grads.bits.tolist(), strict=True)
            if section == 'step_grad'}


def test_the_step_gradients_are_those_the_optimizer_applies_after_clipping():
    model = _model()
    wrapper = OptimWrapper(torch.optim.SGD(model.parameters(), lr=0.1),
                           clip_grad=dict(max_norm=0.01))
    recorder = StepRecorder(model, wrapper, rank=0, world_size=1)
    reference = _model()  # the same weights: its gradients, clipped as the wrapper clips
    _loss(reference).backward()
    total = torch.nn.utils.clip_grad_norm_(reference.parameters(), 0.01)
    assert total > 0.01  # the clipping changes them
    expected = {n: T.to_hex(T.tensor_digest(p.grad)) for n, p in reference.named_parameters()}
    recorder.begin(1)
    wrapper.update_params(_loss(model))
    fields, grads = recorder.finish(1)
    assert _hexes(grads) == expected
    assert [name for _, name in grads.keys] == ['0.weight', '0.bias', '2.weight', '2.bias']
    sketches = fields.pop('sketch')
    assert fields == dict(step=1, step_data={}, step_losses={})
    # the sketches of the applied (clipped) gradients and of the weights after the step
    assert sketches['grad'] == {n: sketch(p.grad).tolist()
                                for n, p in reference.named_parameters()}
    assert sketches['weight'] == {n: sketch(p).tolist() for n, p in model.named_parameters()}
    assert sketches['grad']['0.weight'] != sketches['grad']['2.weight']
    recorder.close()


def test_only_traced_steps_are_read_and_close_removes_the_hook():
    model = _model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    recorder = StepRecorder(model, OptimWrapper(optimizer), rank=0, world_size=1)
    assert 'step' in vars(optimizer)  # the instance's step wrapped
    _loss(model).backward()
    optimizer.step()  # not begun: not a traced step
    assert recorder.finish(1)[1] is None
    recorder.close()
    assert 'step' not in vars(optimizer)  # the class's step again
    recorder.begin(2)
    optimizer.step()
    assert recorder.finish(2)[1] is None  # the hook is gone


def test_micro_batches_are_merged_by_their_place_in_the_global_batch():
    recorder = StepRecorder(_model(), None, rank=0, world_size=1)  # no optimizer: no hook
    recorder.begin(4)
    recorder.add(1, {'0': 'c', '1': 'd'}, {'loss': 'y'})  # the second slice first
    recorder.add(0, {'0': 'a', '1': 'b'}, {'loss': 'x', 'loss_cls': 'z'})
    fields, grads = recorder.finish(4)
    assert fields.pop('sketch')['grad'] == {}  # no optimizer step was read
    assert fields == dict(step=4, step_data={'0': 'a', '1': 'b', '2': 'c', '3': 'd'},
                          step_losses={'0.loss': 'x', '0.loss_cls': 'z', '1.loss': 'y'})
    assert grads is None
    again = recorder.finish(5)[0]  # anew
    again.pop('sketch')
    assert again == dict(step=5, step_data={}, step_losses={})


def test_only_the_early_steps_hold_sketches():
    model = _model()
    wrapper = OptimWrapper(torch.optim.SGD(model.parameters(), lr=0.1))
    recorder = StepRecorder(model, wrapper, rank=0, world_size=1)
    for step in (SKETCHED_STEPS, SKETCHED_STEPS + 1):
        recorder.begin(step)
        wrapper.update_params(_loss(model))
        fields, grads = recorder.finish(step)
        assert grads is not None  # digested either way
        assert ('sketch' in fields) == (step == SKETCHED_STEPS)
    recorder.close()


def test_a_compiled_runs_recorder_reads_the_step_after_dynamo_unhooks_optimizers():
    """In a compiled run the recorder wraps the optimizer instance's ``step`` (torch 2.1's
    dynamo unhooks the classes the first time a process compiles); ``close`` unwraps it."""
    torch.compile(lambda x: x + 1, backend='eager')(torch.ones(2))  # dynamo's patches run
    model = _model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    wrapper = OptimWrapper(optimizer)
    recorder = StepRecorder(model, wrapper, rank=0, world_size=1, compiled=True)
    reference = _model()
    _loss(reference).backward()
    expected = {n: T.to_hex(T.tensor_digest(p.grad)) for n, p in reference.named_parameters()}
    recorder.begin(1)
    wrapper.update_params(_loss(model))
    assert _hexes(recorder.finish(1)[1]) == expected
    recorder.close()
    assert 'step' not in optimizer.__dict__  # the class's step again


def test_a_deep_copy_of_a_hooked_optimizer_steps_itself_without_the_hook():
    """The copy (as EMA or SWA helpers make) updates its own parameters with its class's
    ``step`` (an optimizer's state for copying holds its defaults, state and groups, not
    the instance's wrapped ``step``); the original keeps its weights and its hook."""
    model = _model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    recorder = StepRecorder(model, OptimWrapper(optimizer), rank=0, world_size=1)
    twin = copy.deepcopy(optimizer)
    assert 'step' in vars(optimizer) and twin.step.__func__ is torch.optim.SGD.step
    before = [p.detach().clone() for p in model.parameters()]
    copied = twin.param_groups[0]['params']
    for param in copied:
        param.grad = torch.ones_like(param)
    recorder.begin(1)
    twin.step()
    assert recorder.finish(1)[1] is None  # the copy's step called no hook
    assert all(torch.equal(p, b) for p, b in zip(model.parameters(), before, strict=True))
    assert all(torch.equal(p, b - 0.1) for p, b in zip(copied, before, strict=True))
    recorder.close()
