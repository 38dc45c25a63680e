"""``safe_load``: MMEngine checkpoints load with the allow-list, from any thread."""
import threading

import torch
from support.checkpoints import checkpoint_like

from mmrepro.resume.checkpoint_io import safe_load


def test_loads_in_threads_side_by_side(tmp_path):
    """torch's ``safe_globals`` context edits one process-wide list: one thread's exit
    used to drop the allow-list under another thread's load."""
    path = str(tmp_path / 'ckpt.pth')
    torch.save(checkpoint_like(), path)
    errors = []

    def load_many():
        for _ in range(40):
            try:
                assert safe_load(path)['message_hub']['log_scalars']['loss'].current() == 0.25
            except Exception as err:  # noqa: BLE001 - collected, asserted below
                errors.append(f'{type(err).__name__}: {str(err)[:120]}')

    threads = [threading.Thread(target=load_many) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
