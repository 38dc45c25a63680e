"""The Runner's checkpoints: saved atomically, verified and loaded with mmrepro's
allow-list.

**Saving.** MMEngine writes ``iter_N.pth`` / ``epoch_N.pth`` in place, then
``last_checkpoint``; a run killed during either leaves a truncated file that
``--resume`` picks. ``ReproRunner.save_checkpoint`` writes a local checkpoint through
:class:`~mmrepro.resume.atomic_write.AtomicLocalBackend` (MMEngine's ``backend_args``;
:func:`save_backend_args`), and :class:`ReproCheckpointHook`, which ``ReproRunner`` puts
in place of MMEngine's ``CheckpointHook`` in ``default_hooks``, writes
``last_checkpoint`` the same way, after the checkpoint is complete. Other backends are
MMEngine's. A save the disk or the file system refuses is one line
(:class:`~mmrepro.resume.atomic_write.SaveError`, :func:`save_failed`) naming the last
complete checkpoint to resume from.

**Loading.** Before ``ReproRunner.load_checkpoint`` or ``resume`` loads a local file, it
is checked against the digests saved in it (:func:`verify_loading`,
:mod:`mmrepro.resume.verification`). While they run, MMEngine's loader of local files is
mmrepro's (``weights_only=True`` and an allow-list of what MMEngine checkpoints hold,
:mod:`mmrepro.patches.checkpoint_scheme`, scoped by
:data:`~mmrepro.run.scopes.SAFE_LOADING`).
"""
from __future__ import annotations

import locale
import os.path as osp
from typing import Any, Dict, Optional

from mmengine.dist import is_main_process
from mmengine.fileio import LocalBackend, get_file_backend
from mmengine.hooks import CheckpointHook
from mmengine.registry import HOOKS

from ..resume.atomic_write import ATOMIC_BACKEND, SaveError, atomic_write
from ..resume.preflight import last_checkpoint
from ..resume.verification import enforce, verify_file
from ..run.state import log_pending, run_state


def verify_loading(runner: Any, filename: Any, resuming: bool, settings: Any = None,
                   checkpoint: Optional[Dict[str, Any]] = None) -> None:
    """Check the checkpoint a ReproRunner is about to resume or load against its digests.

    A file that does not match is refused unless ``randomness.verify_checkpoints`` is
    False. The verdict (once per file: the training tool's, where it checked the file
    first) goes to the run state, where the run record reads it, and its line to the log.

    Args:
        runner: The Runner.
        filename: The checkpoint (a missing file is left to MMEngine, which says so).
        resuming: Verify what a resume restores, not the weights alone.
        settings: The run's settings, where the run state has none yet.
        checkpoint: The file, already read.

    Raises:
        IntegrityError: It does not match its digests.
    """
    state = run_state(runner)
    settings = settings if settings is not None else state.settings
    if settings is None or not isinstance(filename, str) or (
            '://' not in filename and not osp.isfile(osp.expanduser(filename))):
        return
    verdict = verify_file(filename, resuming, checkpoint)
    allowed = not settings.verify_checkpoints
    enforce(verdict, allowed)
    said = state.verification
    if said is None or said.path != verdict.path or not set(verdict.parts) <= set(said.parts):
        state.verification = verdict  # a resume's loads its weights again: said once
        state.note(*verdict.log_line(allowed))
        log_pending(runner)


def save_failed(work_dir: str, err: SaveError) -> SaveError:
    """``err`` with how to continue: the last complete checkpoint, to resume from."""
    last = last_checkpoint(work_dir)
    if last:
        return err.but(f'{err}; the last complete checkpoint is {last}: {err.fix}, then '
                       f'continue with --resume {last}')
    return err.but(f'{err}; no checkpoint of this run was saved before: {err.fix}, then '
                   'train again')


def save_backend_args(out_dir: Any, file_client_args: Optional[dict],
                      backend_args: Optional[dict]) -> Optional[dict]:
    """The ``backend_args`` ``Runner.save_checkpoint`` writes with: mmrepro's atomic local
    backend where ``out_dir`` is on the local file system by MMEngine's rules and the
    call names no file client; ``backend_args`` as they are elsewhere."""
    if file_client_args is None and isinstance(out_dir, str) and isinstance(
            get_file_backend(out_dir, backend_args=backend_args), LocalBackend):
        return dict(backend=ATOMIC_BACKEND)
    return backend_args


@HOOKS.register_module()
class ReproCheckpointHook(CheckpointHook):
    """``CheckpointHook`` that writes ``last_checkpoint`` atomically.

    It does what MMEngine's does when it saves a checkpoint (keeps at most
    ``max_keep_ckpts``, removing the oldest first; records ``last_ckpt`` and
    ``keep_ckpt_ids`` in the message hub; saves through the Runner), then writes
    ``last_checkpoint`` with :func:`~mmrepro.resume.atomic_write.atomic_write`. One
    difference: the checkpoint ``last_checkpoint`` names (the oldest kept one where
    ``max_keep_ckpts=1``) is removed only once the next one is complete, so a save that
    fails leaves a checkpoint to resume from.
    """

    def _save_checkpoint_with_step(self, runner: Any, step: int, meta: dict) -> None:
        superseded = self._keep_at_most(runner, step)
        filename = self.filename_tmpl.format(step)
        self.last_ckpt = self.file_backend.join_path(self.out_dir, filename)
        runner.message_hub.update_info('last_ckpt', self.last_ckpt)
        runner.save_checkpoint(self.out_dir, filename, self.file_client_args,
                               save_optimizer=self.save_optimizer,
                               save_param_scheduler=self.save_param_scheduler, meta=meta,
                               by_epoch=self.by_epoch, backend_args=self.backend_args,
                               **self.args)
        if not is_main_process():  # sharded states are pulled from every rank above
            return
        text = str(self.last_ckpt).encode(locale.getpreferredencoding(False))
        try:
            atomic_write(osp.join(runner.work_dir, 'last_checkpoint'), lambda f: f.write(text),
                         size=len(text))
        except SaveError as err:
            raise err.but(f'{err}; {self.last_ckpt} itself was saved complete: {err.fix}, '
                          f'then continue with --resume {self.last_ckpt}') from None
        if superseded is not None:
            self._remove(superseded)

    def _keep_at_most(self, runner: Any, step: int) -> Optional[str]:
        """Before saving ``step``: forget (and on rank 0 remove) the oldest kept one.

        Returns:
            The oldest one where it is also the newest (``max_keep_ckpts=1``): removed
            only once ``step`` is saved.
        """
        if self.max_keep_ckpts <= 0 or (self.keep_ckpt_ids and
                                        self.keep_ckpt_ids[-1] == step):
            return None  # a best and a regular save may both save this step
        superseded = None
        if len(self.keep_ckpt_ids) == self.max_keep_ckpts:
            oldest = self.keep_ckpt_ids.popleft()
            path = self.file_backend.join_path(self.out_dir, self.filename_tmpl.format(oldest))
            if self.keep_ckpt_ids:
                self._remove(path)
            else:
                superseded = path
        self.keep_ckpt_ids.append(step)
        runner.message_hub.update_info('keep_ckpt_ids', list(self.keep_ckpt_ids))
        return superseded

    def _remove(self, path: str) -> None:
        """Remove a checkpoint no longer kept (on rank 0)."""
        if is_main_process() and self.file_backend.isfile(path):
            self.file_backend.remove(path)
        elif is_main_process() and self.file_backend.isdir(path):
            self.file_backend.rmtree(path)  # DeepSpeed saves directories
