"""Test-only hook: each rank writes its seed and final weight digest to the work dir."""
import hashlib
import os.path as osp

from mmengine.dist import get_rank
from mmengine.hooks import Hook
from mmengine.model import is_model_wrapper
from mmengine.registry import HOOKS


@HOOKS.register_module()
class RankProbeHook(Hook):
    """Writes ``rank{r}.txt``: ``seed digest`` of this rank's model after training."""

    def after_run(self, runner) -> None:
        model = runner.model.module if is_model_wrapper(runner.model) else runner.model
        digest = hashlib.sha256()
        for name, tensor in sorted(model.state_dict().items()):
            digest.update(name.encode())
            digest.update(tensor.detach().contiguous().cpu().numpy().tobytes())
        with open(osp.join(runner.work_dir, f'rank{get_rank()}.txt'), 'w') as f:
            f.write(f'{runner.seed} {digest.hexdigest()}\n')
