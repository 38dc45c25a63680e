"""mmrepro.cli.config_args: each tool's one name in its error lines."""
import os.path as osp
import runpy
import sys

import pytest
from support.doc_examples import console_scripts
from support.repro_utils import REPO

#: Console scripts (setup.cfg) whose modules take this module's parser, and their
#: ``tools/`` script.
TOOLS = {'mmrepro-train': 'train.py', 'mmrepro-test': 'test.py',
         'mmrepro-matrix': 'support_matrix.py', 'mmrepro-demo-data': 'make_demo_data.py',
         'mmrepro-digest': 'weights_digest.py', 'mmrepro-bundle': 'bundle.py'}


@pytest.mark.parametrize('how', ['tools/{script}', 'mmrepro/cli/{script}', 'bin/{name}'])
@pytest.mark.parametrize('name', list(TOOLS))
def test_every_error_line_begins_with_the_console_scripts_name(name, how, monkeypatch,
                                                               capsys):
    """Started as ``tools/train.py``, ``python -m mmrepro.cli.train`` or ``mmrepro-train``
    (``sys.argv[0]``), the tool says ``mmrepro-train: error:``: one name per tool, the one
    its ``--help`` and the documentation use."""
    script = osp.join(REPO, 'tools', TOOLS[name])
    argv0 = osp.join(REPO, how.format(script=TOOLS[name], name=name))
    monkeypatch.setattr(sys, 'argv', [argv0, '--no-such-flag'])
    with pytest.raises(SystemExit) as stop:
        runpy.run_path(script, run_name='__main__')
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f'{name}: error: ') and err.count('\n') == 1, err


def test_the_tools_named_here_are_setup_cfgs():
    assert set(TOOLS) <= set(console_scripts())

