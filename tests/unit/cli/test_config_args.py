"""mmrepro.cli.config_args: each tool's one name in its error lines, the default work dir."""
import os.path as osp
import runpy
import sys

import pytest
from mmengine.config import Config
from support.doc_examples import console_scripts
from support.repro_utils import REPO

from mmrepro.cli.config_args import set_work_dir

#: Console scripts (setup.cfg) whose modules take this module's parser, and their
#: ``tools/`` script.
TOOLS = {'mmrepro-train': 'train.py', 'mmrepro-test': 'test.py',
         'mmrepro-matrix': 'support_matrix.py', 'mmrepro-demo-data': 'make_demo_data.py',
         'mmrepro-digest': 'weights_digest.py', 'mmrepro-bundle': 'bundle.py',
         'mmrepro-check': 'check_repro.py', 'mmrepro-diff': 'repro_diff.py'}


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
    assert set(TOOLS) == set(console_scripts())


@pytest.mark.parametrize('given, in_config, expected', [
    ('/tmp/x', 'from_config', '/tmp/x'),                     # --work-dir first
    (None, 'from_config', 'from_config'),                    # then the config's
    (None, None, './work_dirs/retinanet_r18_fpn_3e_tinycoco'),  # then the config's name
])
def test_the_work_dir_is_mmdetections(given, in_config, expected):
    cfg = Config(dict(work_dir=in_config) if in_config else {})
    set_work_dir(cfg, given, 'configs/retinanet_r18_fpn_3e_tinycoco.py')
    assert cfg.work_dir == expected
