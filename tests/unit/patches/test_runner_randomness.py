"""Runner.set_randomness through mmrepro: the intra-op thread count it pins."""
import torch
from mmengine.runner import Runner
from support.toy_runner import Regressor


def _runner(tmp_path, **randomness):
    return Runner(model=Regressor(), work_dir=str(tmp_path), randomness=dict(seed=0, **randomness),
                  custom_hooks=[dict(type='ReproducibilityHook')],
                  experiment_name=f'threads-{randomness.get("threads")}-{id(tmp_path)}')


def test_threads_key_pins_the_intra_op_threads(tmp_path):
    """OMP_NUM_THREADS differs by launcher (torchrun sets 1 only for several processes
    per node); ``randomness.threads`` makes it one number for every layout."""
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        runner = _runner(tmp_path / 'a', threads=1)
        assert torch.get_num_threads() == 1
        with open(runner.logger.log_file) as f:
            assert 'deterministic=False, diff_rank_seed=False, sample_seeding=True, threads=1' \
                in f.read()
        torch.set_num_threads(2)
        _runner(tmp_path / 'b')
        assert torch.get_num_threads() == 2  # no key: PyTorch's own count, untouched
    finally:
        torch.set_num_threads(before)
