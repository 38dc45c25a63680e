"""Running a tool's ``main`` in this process as its console script runs it in a new one.

For ``tests/e2e/test_error_contract.py``: an interpreter start that imports torch and
MMDetection costs seconds per case, while the contract is about what the tool prints and
returns. :func:`run_tool` calls the tool's ``main`` with what a new interpreter would
give it: ``sys.argv``, an environment without the launcher's variables (``os.environ``
is put back after), the working directory, Python's default warning filters (the
warnings shown are added to stderr), logging without pytest's handlers, no MMEngine
global instances (``ManagerMixin``: MMLogger, DefaultScope...; those before are put back
after), stdout and stderr captured at the file descriptors. It fails where the call
leaves behind what would make a later case run in another state than a new interpreter
(a logging handler, torch's thread count or flags), and where the tool re-executes
itself (``os.execv``: the restart ``randomness.cpu_isa`` needs).
"""
from __future__ import annotations

import contextlib
import functools
import importlib
import logging
import os
import sys
import warnings
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Sequence, Tuple
from unittest import mock

from support.cli import run_console

#: What a launcher sets; the cases run without them.
LAUNCHER_VARIABLES = ('RANK', 'LOCAL_RANK', 'WORLD_SIZE', 'MASTER_ADDR', 'MASTER_PORT')


@dataclass(frozen=True)
class Tool:
    """A tool: the script a subprocess runs, the module whose ``main`` runs in-process."""

    script: str
    module: str = ''  # '' for a shell script: only a subprocess runs it
    #: The script exits with what ``main`` returns (``sys.exit(main())``); else it calls
    #: ``main()`` and exits 0 when it returns (``tools/train.py``: it returns the Runner).
    exits_with_main: bool = True


def _process_state() -> Dict[str, Any]:
    """What a tool's ``main`` could change that outlives the call (and a new interpreter
    would not start with), by name."""
    import torch

    # Handlers that write to a stream (the stderr of the call, captured); a module's
    # logger made at its first import, or its NullHandler, changes nothing.
    state: Dict[str, Any] = {
        f'logger {name}': handlers for name, handlers in (
            (name, [h for h in logger.handlers if isinstance(h, logging.StreamHandler)])
            for name, logger in _loggers().items()) if handlers}
    state.update((f'{cls.__qualname__} instances', list(cls._instance_dict))
                 for cls in _managed_classes())
    state.update(torch_threads=torch.get_num_threads(),
                 deterministic=torch.are_deterministic_algorithms_enabled(),
                 cudnn=(torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark),
                 default_dtype=torch.get_default_dtype())
    return state


def _loggers() -> Dict[str, logging.Logger]:
    """Every logger of the ``logging`` module, by name (the root logger: ``root``)."""
    loggers = {'root': logging.getLogger()}
    loggers.update((name, logger) for name, logger in logging.root.manager.loggerDict.items()
                   if isinstance(logger, logging.Logger))
    return loggers


def _managed_classes() -> List[type]:
    """MMEngine's classes of global instances (``ManagerMixin``: MMLogger, MessageHub,
    DefaultScope, Visualizer...)."""
    from mmengine.utils import ManagerMixin
    classes, todo = [], [ManagerMixin]
    while todo:
        cls = todo.pop()
        classes.append(cls)
        todo.extend(cls.__subclasses__())
    return classes


@contextlib.contextmanager
def _no_instances() -> Iterator[None]:
    """No global instances of MMEngine's, as in a new interpreter, inside; the instances
    made inside are dropped on exit (their loggers' handlers closed), those before put
    back. Tests before may have made some (an MMLogger whose handlers write to their
    captured stdout...): the tool would find them instead of making its own."""
    saved = {cls: cls.__dict__['_instance_dict'] for cls in _managed_classes()}
    for cls in saved:
        cls._instance_dict = OrderedDict()
    try:
        yield
    finally:
        for cls, instances in saved.items():
            for instance in cls._instance_dict.values():
                for handler in list(getattr(instance, 'handlers', ())):  # an MMLogger
                    instance.removeHandler(handler)
                    handler.close()
            cls._instance_dict = instances


@contextlib.contextmanager
def _interpreter_logging() -> Iterator[None]:
    """Logging as in a new interpreter, inside: the root logger without pytest's
    handlers, at level WARNING (a record no handler takes goes to stderr, by
    ``logging.lastResort``), and the handlers that libraries set up at their import
    (torch's, made while pytest captured stderr) writing to the call's stderr."""
    root = logging.getLogger()
    saved = root.handlers, root.level
    streams = {handler: handler.stream for logger in _loggers().values()
               for handler in logger.handlers
               if type(handler) is logging.StreamHandler}  # not pytest's, nor a file
    root.handlers, root.level = [], logging.WARNING
    for handler in streams:  # not setStream: it flushes the old stream, maybe closed
        handler.stream = sys.stderr
    try:
        yield
    finally:
        root.handlers, root.level = saved
        for handler, stream in streams.items():
            handler.stream = stream


@contextlib.contextmanager
def _interpreter_warnings() -> Iterator[List[str]]:
    """Python's default warning filters inside; yields (filled on exit) the text a new
    interpreter would print for the warnings shown, on stderr."""
    shown: List[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.resetwarnings()  # then the filters of `python` without -W (its __main__
        for category in (DeprecationWarning, PendingDeprecationWarning,  # is the script,
                         ImportWarning, ResourceWarning):  # which warns of nothing)
            warnings.filterwarnings('ignore', category=category, append=True)
        try:
            yield shown
        finally:
            shown.extend(warnings.formatwarning(w.message, w.category, w.filename, w.lineno,
                                                w.line) for w in caught)


def run_tool(tool: Tool, args: Sequence[str], capfd, monkeypatch) -> Tuple[int, str, str]:
    """``python <tool.script> <args>`` in this process: its exit status, stdout, stderr.

    Runs in the current working directory (the caller's ``monkeypatch.chdir``).
    ``capfd``: what is written to the file descriptors is captured too, as a subprocess's
    pipes would.
    """
    main = importlib.import_module(tool.module).main
    if not tool.exits_with_main:
        main = functools.partial(_then_0, main)
    capfd.readouterr()  # what came before is not the tool's
    before = _process_state()
    monkeypatch.setattr(sys, 'argv', [tool.script, *args])  # the prog name of train.py
    monkeypatch.setattr(os, 'execv', _no_exec)
    with mock.patch.dict(os.environ), _no_instances(), _interpreter_logging(), \
            _interpreter_warnings() as shown:
        for name in LAUNCHER_VARIABLES:
            os.environ.pop(name, None)
        code, out, err = run_console(main, capfd, *args)
    after = _process_state()
    changed = {name: (before.get(name), value) for name, value in after.items()
               if before.get(name) != value}
    assert not changed, (f'{tool.script} {list(args)} changed the process state that a new '
                         f'interpreter starts without (before, after): {changed}; run this '
                         'case in a subprocess')
    return code, out, err + ''.join(shown)


def _then_0(main: Callable[[List[str]], Any], argv: List[str]) -> int:
    main(argv)
    return 0


def _no_exec(path: str, argv: Sequence[str]) -> None:
    raise AssertionError(f'the tool re-executes itself ({path} {list(argv)}): a test running '
                         'it in-process cannot follow; run this case in a subprocess')
