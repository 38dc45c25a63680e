"""What an MMEngine checkpoint holds, written by hand (for the loaders' tests)."""
from collections import Counter

import numpy as np
import torch
from mmengine.logging.history_buffer import HistoryBuffer


def checkpoint_like() -> dict:
    """A checkpoint's kinds of objects: tensors, a HistoryBuffer, numpy arrays, sets,
    Counters, a device and a Size, as MMEngine's Runner saves them."""
    buffer = HistoryBuffer()
    buffer.update(0.5)
    buffer.update(0.25)
    return dict(state_dict={'w': torch.arange(6.).reshape(2, 3), 'n': torch.tensor(3)},
                message_hub=dict(log_scalars={'loss': buffer},
                                 runtime_info={'arr': np.arange(4, dtype=np.int32),
                                               'seed': 7, 'names': {'a', 'b'},
                                               'counts': Counter(a=2)}),
                meta=dict(epoch=1, device=torch.device('cpu'), shape=torch.Size([2, 3])))
