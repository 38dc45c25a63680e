"""MMEngine's evaluation loops under names mmrepro keeps as they are: the control that
shows what ``ReproValLoop``/``ReproTestLoop`` change (``custom_imports`` of a test config)."""
from mmengine.registry import LOOPS
from mmengine.runner import TestLoop, ValLoop


@LOOPS.register_module()
class PlainValLoop(ValLoop):
    """MMEngine's ``ValLoop`` under another name (kept as it is by mmrepro)."""


@LOOPS.register_module()
class PlainTestLoop(TestLoop):
    """MMEngine's ``TestLoop`` under another name (kept as it is by mmrepro)."""
