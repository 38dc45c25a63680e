"""run.scopes: a flag is set for the length of a block, and back after it, on error too."""
from __future__ import annotations

import pytest

from mmrepro.run.scopes import RUNNER_SETUP, SAFE_LOADING, inside


@pytest.mark.parametrize('flag', [SAFE_LOADING, RUNNER_SETUP])
def test_a_flag_is_set_inside_only(flag):
    assert flag.get() is False
    with inside(flag):
        assert flag.get() is True
        with inside(flag):  # nested: the outer block still holds it after
            pass
        assert flag.get() is True
    assert flag.get() is False
    with pytest.raises(RuntimeError), inside(flag):
        raise RuntimeError('a failed load')
    assert flag.get() is False
