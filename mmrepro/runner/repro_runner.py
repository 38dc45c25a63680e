"""``ReproRunner``: MMEngine's Runner with every change mmrepro makes to it, as overrides.

:class:`ReproRunnerMixin` is the list: read top to bottom, its body is what mmrepro
changes in MMEngine's ``Runner``, one override each, in the order a Runner meets them.
Each says what it changes and calls into the module of its concern (randomness,
loaders, model audit, distributed, schedules, checkpoints, hooks, loops, evaluation),
which holds the functions and the loop and hook classes it registers in ``LOOPS`` and
``HOOKS``. :class:`ReproRunner` (registered in ``RUNNERS``) puts it in front of
MMEngine's ``Runner``.

A config gets it with ``runner_type='ReproRunner'`` (the shipped base config sets it),
or through the one entry of :mod:`.entry` when it enables mmrepro with the two
documented lines alone. A Runner of one's own gets it as a mixin:
``class OwnRunner(ReproRunnerMixin, Runner)``.
"""
from __future__ import annotations

import logging
from typing import Any, Dict, List, Mapping, Optional, Union

from mmengine.registry import RUNNERS
from mmengine.runner import Runner
from mmengine.runner.base_loop import BaseLoop
from torch.utils.data import DataLoader

from ..resume.atomic_write import SaveError
from ..run.scopes import RUNNER_SETUP, SAFE_LOADING, inside
from ..run.state import run_state
from .checkpoints import save_backend_args, save_failed, verify_loading
from .distributed import ddp_config
from .epoch_loop import checked_train_loop, train_loop_config
from .evaluation import build_eval_loop, evaluating
from .hooks import repro_custom_hooks, repro_default_hooks
from .loaders import position_after_resume, reproducible_loader
from .model import audit, prepare_compile
from .randomness import set_randomness
from .requested import record_init_args
from .schedules import counting_optimizer_steps, scaling_by_global_batch


class ReproRunnerMixin:
    """mmrepro's changes to MMEngine's ``Runner``, to put in front of a Runner class.

    Every method overrides the ``Runner`` method of its name (see the module).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """MMEngine's ``__init__``, after recording the ``custom_hooks``, ``resume`` and
        ``load_from`` arguments mmrepro reads besides the config (a Runner built with
        keyword arguments has an empty ``cfg``; :mod:`.requested`)."""
        record_init_args(self, args, kwargs)
        run_state(self).note(logging.INFO, f'mmrepro: the Runner is {type(self).__name__}')
        super().__init__(*args, **kwargs)

    # ------------------------------------------------------------------ randomness
    def set_randomness(self, seed: Optional[int] = None, **kwargs: Any) -> None:
        """Seeding through mmrepro: validated settings, a seed never None, full
        deterministic mode; the checkpoint to resume is peeked at for its seed and data
        position (:mod:`.randomness`)."""
        set_randomness(self, seed, kwargs)

    # --------------------------------------------------------------------- loaders
    def build_dataloader(self, dataloader: Any, seed: Optional[int] = None,
                         diff_rank_seed: bool = False) -> DataLoader:
        """Every loader built from a config is reproducible, with the run's seed; the
        train loader of a resumed run starts after the batches the checkpoint consumed
        (:mod:`.loaders`). MMEngine's is a staticmethod; this one is a method, since it
        needs the Runner (MMEngine calls it on the Runner). A DataLoader given as an
        object is returned as it is, as MMEngine does."""
        if isinstance(dataloader, DataLoader):
            return super().build_dataloader(dataloader, seed=seed,
                                            diff_rank_seed=diff_rank_seed)
        return reproducible_loader(self, dataloader, seed)

    # ----------------------------------------------------------------- model audit
    def build_model(self, model: Any) -> Any:
        """MMEngine's model; in deterministic mode, audited for nondeterministic mmcv
        ops, which are replaced where mmrepro can (:mod:`.model`)."""
        return audit(self, super().build_model(model))

    def _maybe_compile(self, target: str) -> None:
        """MMEngine's ``torch.compile`` of ``train_step``, after what inductor needs for
        exact numbers is set, or the run refused with why (:mod:`.model`)."""
        prepare_compile(self)
        super()._maybe_compile(target)

    # ----------------------------------------------------------------- distributed
    def setup_env(self, env_cfg: Dict) -> None:
        """MMEngine's set-up, its process group marked as a ReproRunner's: under
        torchrun's agent store, a store per restart attempt
        (:mod:`mmrepro.patches.distributed`)."""
        with inside(RUNNER_SETUP):
            return super().setup_env(env_cfg)

    def wrap_model(self, model_wrapper_cfg: Optional[Dict], model: Any) -> Any:
        """DDP with explicit settings, recorded (and no ``device_ids`` on CPU)
        (:mod:`.distributed`)."""
        return super().wrap_model(ddp_config(self, model_wrapper_cfg), model)

    # ------------------------------------------------------------------- schedules
    def build_param_scheduler(self, scheduler: Any) -> Any:
        """Under accumulation with the global stream, iteration-based schedules count
        optimizer steps (:mod:`.schedules`)."""
        with counting_optimizer_steps(self):
            return super().build_param_scheduler(scheduler)

    def scale_lr(self, optim_wrapper: Any, auto_scale_lr: Optional[Mapping] = None) -> None:
        """``auto_scale_lr`` scales by the global batch, ``accumulative_counts``
        included (:mod:`.schedules`)."""
        with scaling_by_global_batch(self, optim_wrapper, auto_scale_lr):
            super().scale_lr(optim_wrapper, auto_scale_lr)

    # ----------------------------------------------------------------- checkpoints
    def save_checkpoint(self, out_dir: str, filename: str,
                        file_client_args: Optional[dict] = None, *args: Any,
                        backend_args: Optional[dict] = None, **kwargs: Any) -> None:
        """A local checkpoint is written atomically; a write the disk or the file
        system refuses is one line naming the checkpoint to resume from
        (:mod:`.checkpoints`)."""
        backend_args = save_backend_args(out_dir, file_client_args, backend_args)
        try:
            return super().save_checkpoint(out_dir, filename, file_client_args, *args,
                                           backend_args=backend_args, **kwargs)
        except SaveError as err:
            raise save_failed(self.work_dir, err) from None

    def load_checkpoint(self, filename: str, *args: Any, **kwargs: Any) -> Any:
        """A local file is checked against its weights digest first, and loaded with
        mmrepro's allow-list (:mod:`.checkpoints`,
        :mod:`mmrepro.patches.checkpoint_scheme`)."""
        verify_loading(self, filename, resuming=False)
        with inside(SAFE_LOADING):
            return super().load_checkpoint(filename, *args, **kwargs)

    def resume(self, filename: str, *args: Any, **kwargs: Any) -> None:
        """A local file is checked against the digests of everything a resume restores
        first, and loaded with mmrepro's allow-list; then a train loader built before the
        checkpoint was known starts where it stopped (:mod:`.checkpoints`,
        :mod:`.loaders`)."""
        verify_loading(self, filename, resuming=True)
        with inside(SAFE_LOADING):
            super().resume(filename, *args, **kwargs)
        position_after_resume(self)

    # ----------------------------------------------------------------------- hooks
    def register_hooks(self, default_hooks: Optional[Dict] = None,
                       custom_hooks: Optional[List] = None) -> None:
        """``ReproducibilityHook`` where the config lacks it, and mmrepro's checkpoint
        and scheduler hooks where ``custom_hooks`` ask for MMEngine's (:mod:`.hooks`)."""
        super().register_hooks(default_hooks, repro_custom_hooks(self, custom_hooks))

    def register_default_hooks(self, hooks: Optional[Dict] = None) -> None:
        """mmrepro's checkpoint and scheduler hooks where ``default_hooks`` asks for
        MMEngine's or leaves them to it (:mod:`.hooks`)."""
        super().register_default_hooks(repro_default_hooks(self, hooks))

    # ----------------------------------------------------------------------- loops
    def build_train_loop(self, loop: Union[BaseLoop, dict]) -> BaseLoop:
        """MMEngine's epoch loop is mmrepro's, which numbers a resumed epoch's batches
        from where the checkpoint stopped (:mod:`.epoch_loop`)."""
        built = super().build_train_loop(train_loop_config(loop))
        return checked_train_loop(self, built)

    # ------------------------------------------------------------------ evaluation
    def build_val_loop(self, loop: Union[BaseLoop, dict]) -> BaseLoop:
        """MMEngine's ``ValLoop`` is mmrepro's, whose batches and results do not depend
        on the number of ranks (:mod:`.evaluation`)."""
        return build_eval_loop(self, 'val', loop, super().build_val_loop)

    def build_test_loop(self, loop: Union[BaseLoop, dict]) -> BaseLoop:
        """MMEngine's ``TestLoop`` is mmrepro's, as ``build_val_loop``
        (:mod:`.evaluation`)."""
        return build_eval_loop(self, 'test', loop, super().build_test_loop)

    def val(self) -> Dict[str, Any]:
        """A run that only validates is recorded as one (:mod:`.evaluation`)."""
        evaluating(self, 'val')
        return super().val()

    def test(self) -> Dict[str, Any]:
        """A run that only tests is recorded as one (:mod:`.evaluation`)."""
        evaluating(self, 'test')
        return super().test()


@RUNNERS.register_module()
class ReproRunner(ReproRunnerMixin, Runner):
    """MMEngine's ``Runner`` with mmrepro's changes (see :class:`ReproRunnerMixin`)."""
