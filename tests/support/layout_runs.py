"""Train one config in several process layouts of the same global batch (CPU, gloo)."""
import os.path as osp

from support.dist_utils import dist_train
from support.repro_utils import REPO, pythonpath, run_train, write_config
from support.run_cache import check_options, once, read_options, run_options, write_options

#: A warmup in iterations and a step at epoch 1, a trace of every iteration, each
#: rank's samples written by StreamProbeHook, one intra-op thread in every process.
PROBES = """
custom_imports = dict(imports=['mmrepro', 'support.rank_probe_hook'], allow_failed_imports=False)
custom_hooks = [dict(type='ReproducibilityHook', trace_interval=1), dict(type='StreamProbeHook')]
randomness = dict(threads=1, global_batch=4)
param_scheduler = [
    dict(type='LinearLR', start_factor=0.25, by_epoch=False, begin=0, end=3),
    dict(type='MultiStepLR', by_epoch=True, milestones=[1], gamma=0.1)]
"""
#: name: (per-rank batch size, ranks, accumulative_counts); global batch 4 in each.
LAYOUTS = {'1x4': (4, 1, 1), '2x2': (2, 2, 1), '4x1': (1, 4, 1), '1x2acc2': (2, 1, 2),
           '2x1acc2': (1, 2, 2), '1x1acc4': (1, 1, 4)}


class LayoutRuns:
    """Runs by (model, layout), trained on first use on the tiny COCO data (16 images).

    Each run is trained once per root, whichever process asks first (a file lock per run,
    as :class:`~support.run_cache.RunCache` does), so the session's ``layout_runs``
    (``tests/conftest.py``) serves every xdist worker; a run's name asked again with other
    options raises :class:`ValueError`.
    """

    def __init__(self, root, data_root, max_epochs=2):
        self.root, self.data_root, self.max_epochs = root, data_root, max_epochs
        self._done = {}

    def get(self, model, layout, extra='', tag='', args=(), num_workers=0):
        """Work dir of ``model`` trained in ``layout`` (a key of :data:`LAYOUTS`).

        ``extra`` config lines, ``tools/train.py`` arguments ``args`` (e.g. ``--resume
        CHECKPOINT``) and ``num_workers`` loader workers per rank are given to the run
        called ``tag``.
        """
        key = f'{model}-{layout}{tag}'
        if key not in self._done:
            work_dir = osp.join(self.root, key)
            options = run_options(args, {'extra': extra, 'num_workers': num_workers})
            with once(work_dir) as todo:
                if todo:
                    write_options(work_dir, options)
                    self._train(key, work_dir, model, layout, extra, args, num_workers)
                else:
                    check_options(model, f'{layout}{tag}', read_options(work_dir), options)
            self._done[key] = work_dir
        return self._done[key]

    def _train(self, key, work_dir, model, layout, extra, args, num_workers):
        """Train run ``key`` into ``work_dir`` (called once, under its lock)."""
        batch, ranks, micro = LAYOUTS[layout]
        extra = PROBES + (f'train_dataloader = dict(batch_size={batch})\n'
                          f'optim_wrapper = dict(accumulative_counts={micro})\n') + extra
        config = write_config(osp.join(self.root, f'cfg-{key}', 'cfg.py'), model,
                              self.data_root, extra=extra, num_workers=num_workers,
                              max_epochs=self.max_epochs)
        if ranks == 1:
            run_train(config, work_dir, *args,
                      env={'PYTHONPATH': pythonpath(osp.join(REPO, 'tests'))})
        else:
            dist_train(config, work_dir, *args, nproc=ranks)


def stream(work_dir):
    """Every sample trained on, in global order: (step, slice, place, 'id shape flip digest')."""
    rows = []
    for rank in range(4):
        path = osp.join(work_dir, f'stream-rank{rank}.txt')
        if osp.exists(path):
            with open(path) as f:
                rows += [line.split(' ', 3) for line in f]
    return sorted((int(s), int(v), int(n), rest) for s, v, n, rest in rows)
