"""Whether inductor's code for an accumulating ``index_put`` (embedding backward,
``index_add``) accumulates with atomics, with and without deterministic mode.

    python -m support.inductor_atomics DEVICE

prints ``deterministic <bool> default <bool>``: whether any generated code holds
``atomic_add``. In deterministic mode inductor falls back to eager's deterministic
kernel; without it, it accumulates with atomics (whose order varies on a GPU).
"""
import sys

import torch
from torch._inductor.utils import run_and_get_code


def _add(x, index, values):
    return x.index_put((index,), values, accumulate=True)


def main(device: str) -> None:
    import torch._inductor.config as config
    # compiled anew: code loaded from inductor's cache would not be shown
    for key in ('force_disable_caches', 'fx_graph_cache'):  # as torch names them
        if hasattr(config, key):
            setattr(config, key, key == 'force_disable_caches')
    x, values = torch.zeros(64, device=device), torch.ones(256, device=device)
    index = torch.randint(0, 64, (256,), device=device)
    for mode in ('deterministic', 'default'):
        torch._dynamo.reset()
        torch.use_deterministic_algorithms(mode == 'deterministic')
        _, code = run_and_get_code(torch.compile(_add), x, index, values)
        print(mode, any('atomic_add' in text for text in code))


if __name__ == '__main__':
    main(sys.argv[1])
