#!/usr/bin/env python
"""Cost of ``randomness.cpu_isa``: the demo detector's iteration with each kernel set, CPU.

Times ``model.train_step`` of the demo detector (RetinaNet R18-FPN, batch 2, the
repo's config) in child processes started with this CPU's own kernels and with each
pinned set it can run (the environment ``mmrepro-train`` sets for
``randomness.cpu_isa``). The children alternate (free, pinned, free, pinned, ...),
so that a drift of the machine's speed hits every set alike; each reports the median
of its iterations after one warm-up.

    python benchmarks/bench_cpu_isa.py [--rounds 3] [--iters 6] [--data data/demo]
"""
from __future__ import annotations

import argparse
import datetime
import os
import os.path as osp
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))


def child(data: str, iters: int) -> None:
    """Print this process's kernel set and its median iteration in seconds."""
    from bench_trace import build_runner

    from mmrepro.determinism import cpu
    runner = build_runner(data, tempfile.mkdtemp(prefix='mmrepro-bench-isa-'))
    batches = iter(runner.train_dataloader)
    times = []
    for _ in range(iters + 1):
        batch = next(batches)
        start = time.perf_counter()
        runner.model.train_step(batch, optim_wrapper=runner.optim_wrapper)
        times.append(time.perf_counter() - start)
    print(cpu.capability(), statistics.median(times[1:]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--rounds', type=int, default=3, help='children per kernel set')
    parser.add_argument('--iters', type=int, default=6, help='timed iterations per child')
    parser.add_argument('--data', default='data/demo', help='the demo data (made if missing)')
    parser.add_argument('--child', action='store_true', help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.data, args.iters)

    from mmrepro.demo import make_tiny_coco
    from mmrepro.determinism import cpu
    make_tiny_coco(args.data)
    own = cpu.capability()
    sets = {'this CPU': {}}
    sets.update({f'cpu_isa={isa!r}': cpu.environment(isa)
                 for isa in ('avx2', 'default') if own in ('AVX2', 'AVX512')})
    base = {k: v for k, v in os.environ.items() if k not in cpu.CPU_ISA_ENV['avx2']}
    seconds = {name: [] for name in sets}
    used = {}
    for _ in range(args.rounds):
        for name, env in sets.items():
            out = subprocess.run([sys.executable, __file__, '--child', '--data', args.data,
                                  '--iters', str(args.iters)], env={**base, **env},
                                 check=True, capture_output=True, text=True).stdout.split()
            used[name], value = out[-2], float(out[-1])
            seconds[name].append(value)
    print(f'# randomness.cpu_isa cost, {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC, '
          f'this CPU runs {own} kernels; {args.rounds} alternating children x '
          f'{args.iters} iterations')
    print('| kernels | PyTorch reports | median s/iter (per child) | vs this CPU |')
    print('|---|---|---:|---:|')
    ref = statistics.median(seconds['this CPU'])
    for name, values in seconds.items():
        median = statistics.median(values)
        per_child = ', '.join(f'{v:.3f}' for v in values)
        print(f'| {name} | {used[name]} | {median:.3f} ({per_child}) | '
              f'{(median / ref - 1) * 100:+.1f} % |')


if __name__ == '__main__':
    main()
