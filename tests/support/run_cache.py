"""The session's cache of training runs, shared by the tests (the ``runs`` fixture).

A run is named ``(model, tag)``: its work dir is ``<root>/<model>-<tag>`` and its config
``<root>/<model>-<tag>-cfg/<model>_<tag>.py``. The options it was trained with (the
``tools/train.py`` arguments and the :func:`~support.repro_utils.write_config` keywords)
are written beside it, ``<model>-<tag>.options.json``, and every later use of the name,
in this process or in another xdist worker, must ask for the same options: a name that
comes back with other options raises :class:`ValueError` instead of handing over a run
that was trained otherwise (a comparison of that run with itself would always pass).
"""
from __future__ import annotations

import contextlib
import json
import os
import os.path as osp
from typing import Any, Dict, Iterator, Mapping, Sequence, Tuple

from support.repro_utils import checkpoint, prune_checkpoints, run_train, state_digest, write_config

#: Tags of the cached runs that tests resume from: they keep every checkpoint.
RESUMED_FROM = ('base', 'iterloop', 'iterloop-finite', 'hooks', 'bsr')

#: A run's options, normalised: its CLI arguments and its sorted (keyword, repr(value)).
RunOptions = Tuple[Tuple[str, ...], Tuple[Tuple[str, str], ...]]
#: Everything that changes a run: ``(model, tag, args, config keywords)``.
RunKey = Tuple[str, str, Tuple[str, ...], Tuple[Tuple[str, str], ...]]


@contextlib.contextmanager
def once(path: str) -> Iterator[bool]:
    """Hold the session's lock on ``path``; yield whether it still has to be made.

    ``path`` counts as made once the ``with`` block has ended without an exception (it
    leaves ``<path>.done``); a block that raised leaves it to the next caller.
    """
    from filelock import FileLock
    os.makedirs(osp.dirname(path), exist_ok=True)
    with FileLock(path + '.lock'):
        done = path + '.done'
        yield not osp.exists(done)
        open(done, 'w').close()


def run_options(args: Sequence[str], config_kw: Mapping[str, Any]) -> RunOptions:
    """Normalise a run's options: the CLI ``args`` in order, the config keywords sorted.

    Values are compared by ``repr``, so they need not be hashable nor JSON-serialisable
    (``num_workers=0`` and ``num_workers=False`` count as different options).
    """
    return tuple(args), tuple(sorted((name, repr(value)) for name, value in config_kw.items()))


def run_key(model: str, tag: str, options: RunOptions) -> RunKey:
    """The cache key of run ``(model, tag)`` trained with ``options``."""
    return (model, tag) + options


def describe(options: RunOptions) -> str:
    """``options`` as the arguments of a call, e.g. ``('--seed', '7', num_workers=0)``."""
    args, config = options
    return '(' + ', '.join([repr(arg) for arg in args] +
                           [f'{name}={value}' for name, value in config]) + ')'


def check_options(model: str, tag: str, trained: RunOptions, asked: RunOptions) -> None:
    """Raise :class:`ValueError` unless run ``(model, tag)`` is asked for as it was trained."""
    if trained != asked:
        raise ValueError(f'RunCache: run {(model, tag)!r} was trained with {describe(trained)}; '
                         f'asked again with {describe(asked)}: give the other run its own tag')


def options_path(work_dir: str) -> str:
    """Where the options of the run in ``work_dir`` are recorded (beside it, not in it)."""
    return work_dir + '.options.json'


def write_options(work_dir: str, options: RunOptions) -> None:
    """Record the ``options`` that the run in ``work_dir`` is trained with."""
    args, config = options
    with open(options_path(work_dir), 'w') as f:
        json.dump({'args': list(args), 'config': [list(item) for item in config]}, f, indent=1)


def read_options(work_dir: str) -> RunOptions:
    """The options recorded by :func:`write_options` for the run in ``work_dir``."""
    path = options_path(work_dir)
    if not osp.exists(path):
        raise ValueError(f'RunCache: {work_dir} was made without a record of its options '
                         f'({path}); only RunCache.get may make it')
    with open(path) as f:
        record = json.load(f)
    return tuple(record['args']), tuple((name, value) for name, value in record['config'])


class RunCache:
    """Train each distinct (model, tag, options) once per session; tests share the runs.

    A tag names one set of options: asking for ``(model, tag)`` again with other options
    raises :class:`ValueError` (:func:`check_options`), even from another xdist worker.
    Runs that no test resumes from keep only their last checkpoint.
    """

    def __init__(self, root: str, data_root: str) -> None:
        self.root, self.data_root = root, data_root
        self._done: Dict[RunKey, str] = {}

    def work_dir(self, model: str, tag: str) -> str:
        """Work dir of run ``(model, tag)`` (whatever its options): ``<root>/<model>-<tag>``."""
        return osp.join(self.root, f'{model}-{tag}')

    def config(self, model: str, tag: str = 'base') -> str:
        """The config run ``(model, tag)`` trained (``get`` it first):
        ``<root>/<model>-<tag>-cfg/<model>_<tag>.py``."""
        return osp.join(self.work_dir(model, tag) + '-cfg', f'{model}_{tag}.py')

    def get(self, model: str, tag: str = 'base', *args: str, **config_kw: Any) -> str:
        """Work dir of the run ``(model, tag)``, training it on first use.

        Args:
            model: A repo config's model name, e.g. ``'retinanet'``.
            tag: The run's name; one name, one set of options for the whole session.
            *args: ``tools/train.py`` arguments.
            **config_kw: Keywords of :func:`~support.repro_utils.write_config`.

        Returns:
            The run's work dir.

        Raises:
            ValueError: The run was trained (in this session) with other options.
        """
        options = run_options(args, config_kw)
        key = run_key(model, tag, options)
        if key not in self._done:
            work_dir = self.work_dir(model, tag)
            with once(work_dir) as todo:
                if todo:
                    write_options(work_dir, options)
                    self._train(work_dir, model, tag, args, config_kw)
                else:
                    check_options(model, tag, read_options(work_dir), options)
            self._done[key] = work_dir
        return self._done[key]

    def digest(self, model: str, tag: str = 'base', *args: str, **config_kw: Any) -> str:
        """state_dict digest of the final checkpoint of run ``(model, tag)`` (see :meth:`get`)."""
        return state_digest(checkpoint(self.get(model, tag, *args, **config_kw)))

    def _train(self, work_dir: str, model: str, tag: str, args: Sequence[str],
               config_kw: Mapping[str, Any]) -> None:
        """Train run ``(model, tag)`` into ``work_dir`` (called once, under its lock)."""
        config = write_config(self.config(model, tag), model, self.data_root, **config_kw)
        run_train(config, work_dir, *args)
        if tag not in RESUMED_FROM:
            prune_checkpoints(work_dir)
