#!/usr/bin/env python
"""mmrepro's own cost per training iteration: measured inside one run, component by
component, and as an A/B ratio against plain MMEngine, on the demo RetinaNet R18-FPN.

1. **Inside one run** (``benchmarks/overhead_probe.py``): the demo trains with mmrepro
   in this process, ``num_workers=0`` so that the per-sample work runs here too, and
   every piece of mmrepro's work is timed where it runs: every ``ReproducibilityHook``
   method (of which the keyed draws, the trace, the data position), the trace's
   gradient hooks and autograd callback (on traced iterations) and its optimizer step
   pre-hook (on every iteration), the batch sampler's global stream, the part of
   ``ReproParamSchedulerHook`` that is not MMEngine's, the digests; per sample, the
   keyed fetch less the dataset's own ``__getitem__`` (what a worker does for mmrepro),
   and the main process's save and restore of the RNG states (``num_workers=0`` only);
   per checkpoint and once per run, the record and the resume section. Milliseconds per
   iteration on the main process for untraced iterations (the medians, after the first
   epoch) and per traced step (the default trace: optimizer steps 1, 2, 4, 8, 16...).
   Machine drift moves the medians little: this is the work itself.
2. **A/B against plain MMEngine**: rounds plain, mmrepro, plain, ... in fresh
   processes (the same script and config; plain has no mmrepro line), each timing its
   iterations after the first epoch from MMEngine's own raw per-iteration ``time``
   (``log_processor.window_size=1``, logger interval 1); each mmrepro round's median is
   compared with the mean of the plain rounds on either side, and the plain-to-plain
   drift between neighbouring plain rounds is printed as the floor below which no ratio
   means anything.

    python benchmarks/bench_overhead.py [--rounds 9] [--epochs 3] [--threads 1]
        [--data data/demo] [--out benchmarks/results/overhead_cpu.md]

Goal (docs/benchmarks.md): at most 0.5 ms of main-process work per untraced iteration.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import os.path as osp
import statistics
import subprocess
import sys
import tempfile
from typing import Any, List, Tuple

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))

from overhead_probe import Probe, calls_of, median_of, ms, resolution  # noqa: E402
from timing import report  # noqa: E402 (benchmarks/timing.py, next to this script)

REPO = osp.dirname(osp.dirname(osp.abspath(__file__)))
CONFIG = osp.join(REPO, 'configs', 'retinanet_r18_fpn_3e_tinycoco.py')
#: Main-process work per iteration: (label, depth); depth 0 rows add up to the total,
#: depth 1 rows are part of the row above, depth 2 rows part of the trace's rows.
ITERATION_ROWS = (
    ('ReproducibilityHook.before_train_iter', 0), ('keyed draws (seed_step)', 1),
    ('trace: Tracer.before_train_iter', 1),
    ('ReproducibilityHook.after_train_iter', 0), ('trace: Tracer.after_train_iter', 1),
    ('data position: ResumeKeeper.after_train_iter', 1),
    ('trace: gradient hooks (Tracer._on_grad)', 0),
    ('trace: autograd callback (Tracer._digest_grads)', 0),
    ('trace: optimizer step pre-hook (StepRecorder._before_step)', 0),
    ('batch sampler: the global stream (next batch)', 0),
    ('ReproParamSchedulerHook.after_train_iter less MMEngine\'s', 0),
    ('digests (trace batching: _batch, _resolve)', 2),
    ('sample digests (trace.samples.sample_digests)', 2),
)
SCHEDULER, MMENGINE_SCHEDULER = ('ReproParamSchedulerHook.after_train_iter',
                                 'ParamSchedulerHook.after_train_iter (MMEngine)')
FETCH, GETITEM, HOST = ('keyed fetch (SampleSeedingFetch.__call__)',
                        "the dataset's own __getitem__", 'RNG states saved and restored')


def instrument(probe: Probe, hook: Any, dataset: Any) -> None:
    """Wrap every piece of mmrepro's work the run does (see the module docstring)."""
    from mmengine.hooks import ParamSchedulerHook

    from mmrepro.data import sample_fetch
    from mmrepro.data.seeded_batch_sampler import SeededBatchSampler
    from mmrepro.hooks import reproducibility_hook
    from mmrepro.record.recorder import RunRecorder
    from mmrepro.resume.keeper import ResumeKeeper
    from mmrepro.runner.schedules import ReproParamSchedulerHook
    from mmrepro.trace import steps, tracer
    for name in [n for n in dir(hook) if n.startswith(('before_', 'after_'))]:
        probe.wrap(hook, name, f'ReproducibilityHook.{name}')
    probe.wrap(reproducibility_hook, 'seed_step', 'keyed draws (seed_step)')
    for name in ('before_train_iter', 'after_train_iter'):
        probe.wrap(tracer.Tracer, name, f'trace: Tracer.{name}')
    probe.wrap(tracer.Tracer, '_on_grad', 'trace: gradient hooks (Tracer._on_grad)')
    probe.wrap(tracer.Tracer, '_digest_grads', 'trace: autograd callback (Tracer._digest_grads)')
    probe.wrap(steps.StepRecorder, '_before_step',
               'trace: optimizer step pre-hook (StepRecorder._before_step)')
    for module in (tracer, steps):
        probe.wrap(module, '_batch', 'digests (trace batching: _batch, _resolve)')
    probe.wrap(tracer, '_resolve', 'digests (trace batching: _batch, _resolve)')
    probe.wrap(tracer, 'sample_digests', 'sample digests (trace.samples.sample_digests)')
    probe.wrap(ResumeKeeper, 'after_train_iter', 'data position: ResumeKeeper.after_train_iter')
    for name in ('before_save_checkpoint', 'before_train'):
        probe.wrap(ResumeKeeper, name, f'ResumeKeeper.{name}')
    for name in ('start', 'starting', 'saving', 'finish'):
        probe.wrap(RunRecorder, name, f'RunRecorder.{name}')
    probe.wrap_batches(SeededBatchSampler, '__iter__',
                       'batch sampler: the global stream (next batch)')
    probe.wrap(ReproParamSchedulerHook, 'after_train_iter', SCHEDULER)
    probe.wrap(ParamSchedulerHook, 'after_train_iter', MMENGINE_SCHEDULER)
    fetch = dataset.__dict__['__getitems__']
    probe.wrap(type(fetch), '__call__', FETCH, pending=True)
    probe.wrap(type(dataset), '__getitem__', GETITEM, pending=True)
    for name in ('get_host_states', 'set_host_states'):
        probe.wrap(sample_fetch, name, HOST, pending=True)


def component_run(cfg_path: str, work_dir: str, threads: int) -> Tuple[Probe, Any]:
    """Train the config with mmrepro here, every component timed; the probe and Runner."""
    import torch
    from mmengine.config import Config
    from mmengine.hooks import Hook
    from mmengine.runner import Runner

    import mmrepro  # noqa: F401
    torch.set_num_threads(threads)
    cfg = Config.fromfile(cfg_path)
    cfg.work_dir = work_dir
    cfg.train_dataloader.num_workers = 0
    cfg.train_dataloader.persistent_workers = False
    runner = Runner.from_cfg(cfg)
    probe = Probe()
    hook = next(h for h in runner.hooks if type(h).__name__ == 'ReproducibilityHook')

    class Opens(Hook):
        def before_train_iter(self, runner: Any, batch_idx: int, data_batch: Any = None) -> None:
            tracer = hook._tracer
            probe.open(runner.iter, tracer is not None and tracer.traced(runner.iter))

    class Closes(Hook):
        def after_train_iter(self, runner: Any, *args: Any, **kwargs: Any) -> None:
            probe.close()

    runner.register_hook(Opens(), 'HIGHEST')
    runner.register_hook(Closes(), 'LOWEST')
    instrument(probe, hook, runner.train_dataloader.dataset)
    try:
        runner.train()
    finally:
        probe.restore()
    return probe, runner


def iteration_table(probe: Probe, after: int) -> Tuple[List[str], float]:
    """The per-iteration rows (Markdown) and the untraced total (seconds)."""
    kinds = probe.kinds(after)
    own = {SCHEDULER + " less MMEngine's": lambda it: it.seconds.get(SCHEDULER, 0.0)
           - it.seconds.get(MMENGINE_SCHEDULER, 0.0)}
    label_of = {'ReproParamSchedulerHook.after_train_iter less MMEngine\'s':
                SCHEDULER + " less MMEngine's"}
    rows = ['| main process, per iteration | calls | untraced (ms, median) | traced step '
            '(ms, median) | first iteration (ms) |', '|---|---:|---:|---:|---:|']

    def value(its: List[Any], label: str) -> float:
        key = label_of.get(label, label)
        return median_of(its, key, own.get(key))

    top = [label for label, depth in ITERATION_ROWS if depth == 0]

    def total(it: Any) -> float:
        return sum(own[label_of[label]](it) if label in label_of else it.seconds.get(label, 0.0)
                   for label in top)

    for label, depth in ITERATION_ROWS:
        name = ('', 'of which: ', 'within the trace: ')[depth] + label
        counted = SCHEDULER if label in label_of else label
        rows.append(f"| {name} | {calls_of(kinds['untraced'], counted)} | "
                    f"{ms(value(kinds['untraced'], label))} | "
                    f"{ms(value(kinds['traced'], label))} | "
                    f"{ms(value(kinds['first'], label))} |")
    untraced = median_of(kinds['untraced'], '', total)
    rows.append(f"| **total** | | **{ms(untraced)}** | "
                f"**{ms(median_of(kinds['traced'], '', total))}** | "
                f"{ms(median_of(kinds['first'], '', total))} |")
    rows.append(f"| iterations measured | | {len(kinds['untraced'])} | {len(kinds['traced'])} "
                f"| {len(kinds['first'])} |")
    return rows, untraced


def other_table(probe: Probe) -> List[str]:
    """Per sample (medians over the iterations' batches), per checkpoint and once per run
    (Markdown rows)."""
    seconds = dict(probe.outside)
    calls = dict(probe.outside_calls)
    for it in probe.iterations:
        for label, value in it.seconds.items():
            seconds[label] = seconds.get(label, 0.0) + value
            calls[label] = calls.get(label, 0) + it.calls[label]
    fed = [it for it in probe.iterations if it.calls.get(GETITEM)]
    worker = median_of(fed, '', lambda it: (it.seconds.get(FETCH, 0.0) - it.seconds[GETITEM]
                                            - it.seconds.get(HOST, 0.0)) / it.calls[GETITEM])
    rows = ['| elsewhere | calls | ms per call |', '|---|---:|---:|',
            f'| per sample, in the workers: {FETCH} less {GETITEM} (median over batches) | '
            f'{calls.get(GETITEM, 0)} | {ms(worker)} |',
            f'| per batch, main process with num_workers=0 only: {HOST} (median) | '
            f'{calls.get(HOST, 0)} | {ms(median_of(fed, HOST))} |']
    shown = {label for label, _ in ITERATION_ROWS} | {FETCH, GETITEM, HOST, SCHEDULER,
                                                      MMENGINE_SCHEDULER}
    for label in sorted(set(seconds) - shown):
        count = calls.get(label, 0)
        if count:
            rows.append(f'| {label} | {count} | {ms(seconds[label] / count)} |')
    return rows


# ------------------------------------------------------------------------ A/B rounds
def round_config(root: str, data: str, epochs: int, plain: bool) -> str:
    """The demo config for one round: the data, ``epochs`` epochs, no validation; plain:
    without mmrepro (MMEngine's Runner, its own seeding, the same deterministic mode)."""
    path = osp.join(root, 'plain.py' if plain else 'mmrepro.py')
    lines = [f'_base_ = {CONFIG!r}', f"data_root = {data.rstrip('/') + '/'!r}",
             'train_dataloader = dict(dataset=dict(data_root=data_root))',
             f'train_cfg = dict(max_epochs={epochs}, val_interval={epochs + 1})',
             'val_dataloader = None', 'val_cfg = None', 'val_evaluator = None',
             'default_hooks = dict(logger=dict(type="LoggerHook", interval=1))',
             'log_processor = dict(window_size=1)']
    if plain:
        lines += ['custom_imports = None', "runner_type = 'Runner'", 'custom_hooks = []']
    with open(path, 'w') as f:
        f.write('\n'.join(lines) + '\n')
    return path


def train_round(config: str, work_dir: str, threads: int) -> None:
    """One round in this process (``--train``): MMEngine's Runner.from_cfg, as
    MMDetection's tools/train.py builds it."""
    import torch
    from mmengine.config import Config
    from mmengine.runner import Runner
    torch.set_num_threads(threads)
    cfg = Config.fromfile(config)
    cfg.work_dir = work_dir
    Runner.from_cfg(cfg).train()


def round_times(work_dir: str, after: int) -> List[float]:
    """MMEngine's raw per-iteration ``time`` of the iterations after ``after``."""
    [scalars] = glob.glob(osp.join(work_dir, '*', 'vis_data', 'scalars.json'))
    with open(scalars) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [row['time'] for row in rows if 'time' in row and row.get('iter', 0) > after]


def ab_rounds(root: str, data: str, rounds: int, epochs: int, threads: int,
              after: int) -> List[str]:
    """Rounds plain, mmrepro, plain, ...; the ratios and the floor (Markdown rows)."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    medians: List[Tuple[str, float]] = []
    for number in range(rounds):
        kind = 'plain' if number % 2 == 0 else 'mmrepro'
        config = round_config(root, data, epochs, kind == 'plain')
        work_dir = osp.join(root, f'round{number}-{kind}')
        subprocess.run([sys.executable, __file__, '--train', config, work_dir, '--threads',
                        str(threads)], check=True, env=env, cwd=root,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        medians.append((kind, statistics.median(round_times(work_dir, after))))
        print(f'  round {number + 1}/{rounds} {kind}: {medians[-1][1] * 1e3:.1f} ms per '
              'iteration (median)', flush=True)
    plain = [value for kind, value in medians if kind == 'plain']
    drift = [abs(b / a - 1) for a, b in zip(plain, plain[1:], strict=False)]
    rows = ['| round | median iteration (ms) | vs the plain rounds on either side |',
            '|---|---:|---:|']
    ratios = []
    for number, (kind, value) in enumerate(medians):
        text = ''
        if kind == 'mmrepro':
            ratio = value / ((medians[number - 1][1] + medians[number + 1][1]) / 2)
            ratios.append(ratio)
            text = f'{ratio:.4f}'
        rows.append(f'| {number + 1} {kind} | {value * 1e3:.1f} | {text} |')
    floor = max(drift) if drift else float('nan')
    ratio = statistics.median(ratios)
    rows += ['', f'A/B ratio (median of {len(ratios)}): {ratio:.4f}; floor (plain vs the next '
             f'plain round): {min(drift):.2%} to {floor:.2%}, median '
             f'{statistics.median(drift):.2%}; the ratio is '
             f"{'within' if abs(ratio - 1) <= floor else 'beyond'} its floor"]
    return rows


#: The command line: (flag, ``add_argument`` keywords).
OPTIONS = (
    ('--rounds', dict(type=int, default=9, help='A/B rounds, plain first and last (odd, 3 '
                      'or more; 0: none)')),
    ('--epochs', dict(type=int, default=3, help='epochs per run (8 iterations each)')),
    ('--threads', dict(type=int, default=1, help='intra-op threads')),
    ('--data', dict(default='data/demo', help='the demo data (made if missing)')),
    ('--out', dict(help='also write the tables to this Markdown file')),
    ('--train', dict(nargs=2, metavar=('CONFIG', 'WORK_DIR'),  # one A/B round, in a fresh
                     help=argparse.SUPPRESS)),                # process
)


def main() -> None:
    parser = argparse.ArgumentParser(description="mmrepro's own cost per training iteration, "
                                     'inside one run and against plain MMEngine')
    for flag, options in OPTIONS:
        parser.add_argument(flag, **options)
    args = parser.parse_args()
    if args.train:
        return train_round(*args.train, args.threads)
    if args.rounds and (args.rounds % 2 == 0 or args.rounds < 3):
        parser.error(f'--rounds {args.rounds}: expected 0 or an odd number from 3 (plain '
                     'first and last, and a drift between two plain rounds)')
    if args.epochs < 2:
        parser.error(f'--epochs {args.epochs}: expected 2 or more (the first epoch is left '
                     'out of the medians)')
    from mmrepro.demo import make_tiny_coco
    data = osp.abspath(args.data)
    if not osp.isdir(osp.join(data, 'annotations')):
        make_tiny_coco(data)
    after = 8  # the first epoch's iterations (8 at batch 2) are left out
    with tempfile.TemporaryDirectory(prefix='mmrepro-overhead-') as root:
        config = round_config(root, data, args.epochs, plain=False)
        probe, runner = component_run(config, osp.join(root, 'components'), args.threads)
        rows, untraced = iteration_table(probe, after)
        rows += ['', f'goal: at most 0.5 ms per untraced iteration: '
                 f"{'met' if untraced <= 5e-4 else 'NOT met'} ({ms(untraced)} ms); a timer "
                 f'records {resolution() * 1e6:.2f} us around a call that does nothing', '']
        rows += other_table(probe)
        if args.rounds:
            print('A/B rounds against plain MMEngine:', flush=True)
            rows += ['', *ab_rounds(root, data, args.rounds, args.epochs, args.threads, after)]
    report("mmrepro's own cost per iteration (demo RetinaNet R18-FPN)", args.threads,
           f'one run timed inside (num_workers=0, {args.epochs} epochs; medians after the '
           f'first epoch), then {args.rounds} A/B rounds in fresh processes', rows, args.out)


if __name__ == '__main__':
    main()
