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


def without_part_digests(checkpoint: dict, weights_too: bool = False) -> dict:
    """``checkpoint`` as a writer without part digests saved it: an earlier mmrepro (the
    weights digest only), or with ``weights_too`` one without mmrepro (no digest)."""
    from mmrepro.resume.digests import META_KEY, PARTS_KEY
    checkpoint['meta'].pop(PARTS_KEY)
    if weights_too:
        checkpoint['meta'].pop(META_KEY)
    return checkpoint


def flip_bit(path: str, tensor: torch.Tensor, bit: int = 0) -> None:
    """Flip one bit of ``tensor``'s bytes where they lie in the checkpoint file ``path``
    (found by content; the file is otherwise left as it is, as a storage fault would)."""
    raw = tensor.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
    with open(path, 'r+b') as f:
        data = f.read()
        at = data.find(raw)
        assert at >= 0 and data.find(raw, at + 1) < 0, 'its bytes are not in the file once'
        f.seek(at + len(raw) // 2)
        f.write(bytes([data[at + len(raw) // 2] ^ (1 << bit)]))
