"""Test-only hook: each rank writes its seed and final weight digest to the work dir."""
import hashlib
import os
import os.path as osp
import signal

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


@HOOKS.register_module()
class KillRankHook(Hook):
    """Test-only hook: rank ``rank`` kills itself (SIGKILL) after iteration ``at_iter``.

    It runs last after the iteration (priority LOWEST), so a checkpoint due at ``at_iter``
    is on disk first. Once per work dir (a marker file, ``killed-rank{rank}``), so the
    resumed run trains on. The kill is placed by the run's own progress: a kill from
    outside, timed by a clock, raced the run's end.

    Args:
        rank: The rank that dies (0 in a run without a process group).
        at_iter: Iterations done (global count, resumed ones included) when it dies.
        group: Kill this process's whole process group at once (the run and its
            dataloader workers) rather than the process alone. Only where this process
            leads its group, as a run started in a session of its own does
            (``subprocess.Popen(..., start_new_session=True)``): anywhere else the group
            holds the launcher or the test runner, and the hook raises instead.
    """

    priority = 'LOWEST'  # after CheckpointHook

    def __init__(self, rank: int = 1, at_iter: int = 8, group: bool = False) -> None:
        self.rank, self.at_iter, self.group = rank, at_iter, group

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        marker = osp.join(runner.work_dir, f'killed-rank{self.rank}')
        if get_rank() != self.rank or runner.iter + 1 != self.at_iter or osp.exists(marker):
            return
        if self.group and os.getpgid(0) != os.getpid():
            raise RuntimeError('KillRankHook(group=True): this process does not lead its '
                               'process group (start the run with start_new_session=True)')
        open(marker, 'w').close()
        if self.group:
            os.killpg(os.getpid(), signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)


@HOOKS.register_module()
class StreamProbeHook(Hook):
    """Test-only hook: each rank writes what every sample of its batches looked like.

    ``stream-rank{r}.txt`` gets one line per sample: optimizer step, slice of the global
    batch (``rank x k + micro-batch``), place in the slice, image id, shape after the
    pipeline, flip, and a digest of the image tensor and its boxes.
    """

    def before_train_iter(self, runner, batch_idx, data_batch=None) -> None:
        micro = getattr(runner.optim_wrapper, '_accumulative_counts', 1)
        step, j = divmod(runner.iter, micro)
        lines = []
        for n, (img, sample) in enumerate(zip(data_batch['inputs'],
                                              data_batch['data_samples'], strict=True)):
            digest = hashlib.sha256(img.contiguous().numpy().tobytes())
            boxes = sample.gt_instances.bboxes
            digest.update(getattr(boxes, 'tensor', boxes).numpy().tobytes())
            lines.append(f'{step} {get_rank() * micro + j} {n} {sample.img_id} '
                         f'{tuple(sample.img_shape)} {sample.flip} {digest.hexdigest()[:16]}\n')
        with open(osp.join(runner.work_dir, f'stream-rank{get_rank()}.txt'), 'a') as f:
            f.writelines(lines)
