"""mmrepro.determinism.compile: MMEngine's compile setting, what mmrepro sets or refuses,
the record's section, and hooks kept out of compilation."""
import pytest
import torch
import torch._dynamo

from mmrepro.determinism import compile as C


def test_compile_options_normalise_mmengine_setting():
    assert C.compile_options(None) is None and C.compile_options(False) is None
    assert C.compile_options(True) == {}
    given = dict(backend='aot_eager')
    options = C.compile_options(given)
    assert options == given and options is not given
    with pytest.raises(TypeError) as err:
        C.compile_options('inductor')
    assert str(err.value) == (
        "compile='inductor': expected True, False or a dict of torch.compile arguments, "
        "e.g. compile=dict(backend='inductor', mode='default')")


def test_compiling_reads_the_runner_config():
    class Runner:
        def __init__(self, cfg):
            self.cfg = cfg
    assert C.compiling(Runner(dict(compile=True)))
    assert not C.compiling(Runner(dict(compile=False))) and not C.compiling(Runner({}))
    assert not C.compiling(object())


def test_backend_names():
    assert C.backend_name({}) == 'inductor'
    assert C.backend_name(dict(backend='aot_eager')) == 'aot_eager'
    assert C.backend_name(dict(backend=test_backend_names)).endswith('.test_backend_names')


def _has(key):
    return C._read(C._inductor_config(), key)[0]


def test_inductor_gets_eager_random_numbers_and_no_timed_choice():
    needs = C.requirements({}, deterministic=True, on_cuda=False)
    assert not needs.refusal
    sets = {key: value for key, value, _ in needs.sets}
    assert sets['fallback_random'] is True
    assert ('deterministic' in sets) == _has('deterministic')  # torch >= 2.6 has it
    assert all(why and '\n' not in why for _, _, why in needs.sets)
    # not in deterministic mode: no kernel restriction; a key the options give is theirs
    relaxed = C.requirements(dict(options=dict(fallback_random=False)), False, False)
    assert relaxed.sets == []
    assert C.requirements(dict(backend='aot_eager'), True, True) == ([], '')


def test_cuda_graphs_are_refused_in_deterministic_mode_on_cuda():
    needs = C.requirements(dict(mode='reduce-overhead'), deterministic=True, on_cuda=True)
    assert needs.refusal.startswith("compile: mode='reduce-overhead' (CUDA graphs): ")
    assert "use mode='default'" in needs.refusal
    assert C.requirements(dict(options={'triton.cudagraphs': True}), True, True).refusal
    assert not C.requirements(dict(mode='reduce-overhead'), True, on_cuda=False).refusal
    assert not C.requirements(dict(mode='reduce-overhead'), False, on_cuda=True).refusal


def test_timed_kernel_choice_is_refused_where_torch_cannot_avoid_it(monkeypatch):
    needs = C.requirements(dict(mode='max-autotune'), deterministic=True, on_cuda=True)
    assert not needs.refusal if _has('deterministic') else needs.refusal
    real = C._read
    monkeypatch.setattr(C, '_read', lambda config, key: (False, None) if key ==
                        'deterministic' else real(config, key))
    needs = C.requirements(dict(mode='max-autotune'), deterministic=True, on_cuda=True)
    assert needs.refusal.startswith("compile: mode='max-autotune': inductor picks kernels by "
                                    'timing them')
    assert C.requirements(dict(options=dict(coordinate_descent_tuning=True)), True,
                          True).refusal


def test_apply_settings_sets_inductor_config():
    config = C._inductor_config()
    before = config.fallback_random
    try:
        C.apply_settings([('fallback_random', not before, 'why')])
        assert config.fallback_random is (not before)
    finally:
        config.fallback_random = before


def test_record_section(monkeypatch):
    from torch._inductor import config
    if hasattr(config, 'deterministic'):  # torch's default: a deterministic compiled run
        monkeypatch.setattr(config, 'deterministic', False)  # earlier in this process sets it
    assert C.compile_record(None) == dict(enabled=False)
    section = C.compile_record(dict(backend='aot_eager', dynamic=False))
    assert section['enabled'] is True and section['backend'] == 'aot_eager'
    assert section['mode'] == 'default' and section['dynamic'] is False
    assert section['fullgraph'] is False and section['options'] == {}
    assert 'inductor' not in section  # aot_eager runs eager's kernels
    assert set(section['dynamo']) >= {'cache_size_limit', 'automatic_dynamic_shapes'}
    inductor = C.compile_record(True)['inductor']
    assert inductor['fallback_random'] is True  # as mmrepro sets it
    assert set(inductor) >= {'max_autotune', 'triton.cudagraphs', 'cpp.simdlen'}
    given = C.compile_record(dict(options=dict(fallback_random=False)))
    assert given['inductor']['fallback_random'] is False
    assert given['options'] == {'fallback_random': 'False'}
    assert C.compile_record(True, deterministic=False)['inductor'].get('deterministic') \
        in (None, False)


def test_outside_graphs_runs_eagerly_inside_a_compiled_function():
    seen = []

    def hook(x):
        seen.append(torch._dynamo.is_compiling())
        return x.nbytes  # a FakeTensor with symbolic sizes would raise here

    excluded = C.outside_graphs(hook)

    def step(x):
        y = x * 2
        excluded(y)
        return y + 1

    compiled = torch.compile(step, backend='eager', dynamic=True)
    for size in (3, 5):
        assert torch.equal(compiled(torch.ones(size)), torch.full((size,), 3.0))
    assert seen == [False, False]
    traced = []  # the same call, not excluded: dynamo traces it

    def plain(x):
        traced.append(torch._dynamo.is_compiling())
        return x * 2

    torch.compile(plain, backend='eager')(torch.ones(2))
    assert traced == [True]


def test_a_config_that_cannot_compile_exactly_here_is_refused_before_training(monkeypatch):
    cfg = dict(compile=dict(mode='reduce-overhead'), randomness=dict(deterministic=True))
    C.check_compile(cfg)  # on CPU: no CUDA graphs
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: True)
    with pytest.raises(ValueError, match=r"^compile: mode='reduce-overhead' \(CUDA graphs\)"):
        C.check_compile(cfg)
    C.check_compile(dict(cfg, randomness=dict(deterministic=False)))
    C.check_compile(dict(compile=False, randomness=dict(deterministic=True)))
    with pytest.raises(TypeError, match=r"^compile='inductor': expected True, False or a dict"):
        C.check_compile(dict(compile='inductor'))
