"""Training state the data preprocessor keeps between iterations, outside checkpoints.

MMDetection's ``BatchSyncRandomResize`` (YOLOX, and any config that adds it to
``data_preprocessor.batch_augments``) draws a new input size every ``interval``
iterations and keeps it in ``_input_size`` until the next draw. MMEngine's checkpoint
does not carry it, so a resumed run would train at the batch's own size until the next
draw. :func:`capture` reads every such attribute of the model's data preprocessor, the
hook stores it in the checkpoint's ``mmrepro`` section, and :func:`restore` sets it
back before the first resumed iteration; :class:`PreprocessorState` is the same pair as a
part of the resume state. (The draws themselves come from python
``random`` on rank 0, whose state the section restores too.)
"""
from __future__ import annotations

from typing import Any, Dict, List

from torch import nn

__all__ = ['STATE_ATTRS', 'PreprocessorState', 'capture', 'restore']

#: Attributes of data-preprocessor submodules that carry state between iterations.
STATE_ATTRS = ('_input_size',)


def _preprocessor(model: nn.Module) -> nn.Module:
    from mmengine.model import is_model_wrapper
    model = model.module if is_model_wrapper(model) else model
    return getattr(model, 'data_preprocessor', None) or nn.Module()


def capture(model: nn.Module) -> Dict[str, Any]:
    """``{'<submodule>.<attr>': value}`` for every :data:`STATE_ATTRS` entry present."""
    out: Dict[str, Any] = {}
    for name, module in _preprocessor(model).named_modules():
        for attr in STATE_ATTRS:
            if attr in vars(module):
                value = vars(module)[attr]
                out[f'{name}.{attr}'] = None if value is None else [int(v) for v in value]
    return out


def restore(model: nn.Module, state: Dict[str, Any]) -> List[str]:
    """Set what :func:`capture` returned; return the entries restored.

    Raises:
        ValueError: An entry names a submodule or attribute this model's data
            preprocessor lacks (the checkpoint comes from another config).
    """
    modules = dict(_preprocessor(model).named_modules())
    restored = []
    for key, value in state.items():
        name, _, attr = key.rpartition('.')
        module = modules.get(name)
        if module is None or attr not in STATE_ATTRS or attr not in vars(module):
            raise ValueError(
                f'mmrepro: the checkpoint holds data-preprocessor state {key!r}, which this '
                "model's data_preprocessor lacks; resume with the config that wrote it.")
        setattr(module, attr, None if value is None else tuple(value))
        restored.append(key)
    return restored


class PreprocessorState:
    """A model's data-preprocessor state as a part of the resume state.

    Args:
        model: The Runner's model (wrapped or not).
    """

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        #: The entries the last :meth:`load_state_dict` set.
        self.restored: List[str] = []

    def state_dict(self) -> Dict[str, Any]:
        """The state between iterations (:func:`capture`)."""
        return capture(self.model)

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Set a state from :meth:`state_dict`; :attr:`restored` lists what was set.

        Raises:
            ValueError: see :func:`restore`.
        """
        self.restored = restore(self.model, state)
