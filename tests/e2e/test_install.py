"""A wheel of mmrepro, pip-installed into an existing environment, as a user would.

The "user environment" is a new virtual environment that sees this stack's packages
(torch, mmcv, mmdet, mmengine, numpy) through a ``.pth`` file, so pip's resolver
treats them as installed and anything it changed would land in the new environment
only. It sees all of them but mmrepro (tools/setup_env.sh links the checkout's):
before the install, mmrepro is not there. Everything then runs from outside
the checkout.

The "old environment" is one more: a team's MMEngine and MMDetection of an older
release (:data:`OLD_STACK`, pure-Python wheels from PyPI, cached in
``$MMREPRO_ENV_HOME/wheels/pypi``) installed over this stack's torch and mmcv. mmrepro
must install beside them as its requirements stand, and train exactly there with
MMDetection's own ``tools/train.py``. ``MMREPRO_OLD_STACK="mmengine==0.8.5 mmdet==3.3.0"``
tests another pair.
"""
from __future__ import annotations

import glob
import json
import os
import os.path as osp
import re
import shutil
import site
import subprocess
import sys

import pytest
from support import repro_utils
from support.repro_utils import REPO, env_home, state_digest, write_config

#: Packages whose installed versions a user's environment must keep.
KEPT = ('torch', 'mmcv', 'mmdet', 'mmengine', 'numpy')
#: Left out of the copy the wheel is built from: at the top of the checkout only.
_TOP_IGNORED = {'.git', '.venv', '.venv-floor', 'work_dirs', 'data', 'build', '.pytest_cache',
                '.ruff_cache'}


def _ignored(directory: str, names: list) -> set:
    top = osp.samefile(directory, REPO)
    return {n for n in names if n == '__pycache__' or n.endswith('.egg-info')
            or (top and n in _TOP_IGNORED)}


def _run(*cmd: str, cwd: str, check: bool = True) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ('PYTHONPATH', 'PIP_CONSTRAINT')}
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    if check:
        assert proc.returncode == 0, f'{cmd}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}'
    return proc


def _pip(user_python: str, *args: str, cwd: str) -> subprocess.CompletedProcess:
    return _run(sys.executable, '-m', 'pip', '--disable-pip-version-check', '--python',
                user_python, *args, cwd=cwd)


def _kept_versions(user_python: str, cwd: str) -> dict:
    lines = _pip(user_python, 'list', '--format=freeze', cwd=cwd).stdout.splitlines()
    versions = dict(line.split('==', 1) for line in lines if '==' in line)
    return {name: versions.get(name) for name in (*KEPT, 'mmrepro')}


def _is_mmrepro(name: str) -> bool:
    """Whether a site-packages entry is mmrepro's: its package (or the link to a
    checkout's), metadata, ``.pth`` file, or the finder and ``.pth`` file of an editable
    install."""
    return re.match(r'(__editable__[._]+)?mmrepro([-_.]|$)', name) is not None


def _stack_view(root) -> str:
    """A directory of links to this stack's site-packages entries but mmrepro's."""
    view = root / 'stack'
    if not view.exists():
        view.mkdir()
        packages = site.getsitepackages()[0]
        for name in os.listdir(packages):
            if not _is_mmrepro(name):
                os.symlink(osp.join(packages, name), view / name)
    return str(view)


def _user_venv(root, name: str, *wheels: str) -> str:
    """A venv over this stack (``_stack.pth``: :func:`_stack_view`, its ``.pth`` files
    run) holding ``wheels`` (``--no-deps``): the user's environment before mmrepro.
    Returns its python."""
    venv = root / name
    _run(sys._base_executable, '-m', 'venv', '--without-pip', str(venv), cwd=str(root))
    python = str(venv / 'bin' / 'python')
    purelib = _run(python, '-c', 'import sysconfig; print(sysconfig.get_paths()["purelib"])',
                   cwd=str(root)).stdout.strip()
    with open(osp.join(purelib, '_stack.pth'), 'w') as f:
        f.write(f'import site; site.addsitedir({_stack_view(root)!r})\n')
    if wheels:  # into the venv even where this stack has the same version; never over it
        _pip(python, 'install', '--no-index', '--no-deps', '--ignore-installed', *wheels,
             cwd=str(root))
    return python


def _install_mmrepro(python: str, wheel: str, outside: str) -> dict:
    """pip-install the wheel as its requirements stand (the resolver checks them against
    what is installed; nothing may be fetched) and list the versions before and after."""
    before = _kept_versions(python, outside)
    install = _pip(python, 'install', '--no-index', wheel, cwd=outside)
    return dict(python=python, bin=osp.dirname(python), outside=outside, before=before,
                after=_kept_versions(python, outside), install=install.stdout)


@pytest.fixture(scope='module')
def wheel(tmp_path_factory) -> str:
    """mmrepro's wheel, built from a copy of the checkout."""
    pytest.importorskip('mmdet', reason='the user environment is torch + mmcv + mmdet')
    root = tmp_path_factory.mktemp('wheel')
    source, wheels = root / 'src', root / 'wheels'
    shutil.copytree(REPO, source, symlinks=True, ignore=_ignored)
    _run(sys.executable, '-m', 'pip', 'wheel', '--no-deps', '--no-build-isolation', '-q',
         '-w', str(wheels), str(source), cwd=str(root))
    return str(next(wheels.glob('mmrepro-*.whl')))


@pytest.fixture(scope='module')
def user_env(tmp_path_factory, wheel) -> dict:
    """The wheel installed into a user environment of this stack."""
    root = tmp_path_factory.mktemp('install')
    outside = root / 'elsewhere'
    outside.mkdir()
    return _install_mmrepro(_user_venv(root, 'user'), wheel, str(outside))


def test_install_changes_none_of_the_users_packages(user_env):
    before, after = user_env['before'], user_env['after']
    assert before['mmrepro'] is None and after['mmrepro'] is not None
    assert all(before[name] for name in KEPT), before
    assert {k: after[k] for k in KEPT} == {k: before[k] for k in KEPT}


#: Every console script the wheel installs, and a word of its ``--help``.
CONSOLE_SCRIPTS = {'mmrepro-train': '--seed', 'mmrepro-check': '--resume-check',
                   'mmrepro-diff': '--plot', 'mmrepro-matrix': '--families',
                   'mmrepro-demo-data': '--num-train', 'mmrepro-digest': 'CHECKPOINT',
                   'mmrepro-bundle': '--weights', 'mmrepro-test': '--launcher'}

#: Calls every installed ``mmrepro-*`` console script's entry point as its script does
#: (``sys.exit(main())`` with ``sys.argv = [name, '--help']``), in one interpreter.
ENTRY_POINTS = """
import contextlib, io, json, sys
from importlib.metadata import entry_points
helps = {}
for point in entry_points(group='console_scripts'):
    if point.name.startswith('mmrepro-'):
        sys.argv, out = [point.name, '--help'], io.StringIO()
        with contextlib.redirect_stdout(out):
            try:
                sys.exit(point.load()())
            except SystemExit as stop:
                code = stop.code
        helps[point.name] = [code, out.getvalue()]
print(json.dumps(helps))
"""


def test_console_scripts_and_module_entry_points(user_env):
    """One script runs as its executable (the wrappers pip writes are alike); every
    script's entry point answers ``--help`` in one interpreter of the user environment."""
    out = _run(osp.join(user_env['bin'], 'mmrepro-diff'), '--help', cwd=user_env['outside'])
    assert CONSOLE_SCRIPTS['mmrepro-diff'] in out.stdout, out.stdout[:500]
    helps = json.loads(_run(user_env['python'], '-c', ENTRY_POINTS,
                            cwd=user_env['outside']).stdout.splitlines()[-1])
    assert sorted(helps) == sorted(CONSOLE_SCRIPTS)
    for script, word in CONSOLE_SCRIPTS.items():
        code, text = helps[script]
        assert code in (0, None) and word in text, (script, code, text[:500])
    out = _run(user_env['python'], '-m', 'mmrepro.cli.train', '--help',
               cwd=user_env['outside'])
    assert '--deterministic' in out.stdout


PROBE = """
import mmrepro
from mmengine.config import Config
cfg = Config.fromfile('child.py')
zoo = Config.fromfile('zoo.py')
print(mmrepro.__file__)
print(cfg.randomness, cfg.custom_imports.imports, cfg.model.type,
      [h['type'] for h in cfg.custom_hooks])
print(zoo.model.type, zoo.randomness)
"""


def test_a_config_elsewhere_inherits_the_installed_configs(user_env):
    outside = user_env['outside']
    with open(osp.join(outside, 'child.py'), 'w') as f:
        f.write("_base_ = ['mmdet::rtmdet/rtmdet_tiny_8xb32-300e_coco.py',\n"
                "          'mmrepro::_base_/repro_runtime.py']\n"
                "randomness = dict(seed=5)\n")
    with open(osp.join(outside, 'zoo.py'), 'w') as f:
        f.write("_base_ = ['mmrepro::zoo/yolox.py']\n")
    out = _run(user_env['python'], '-c', PROBE, cwd=outside).stdout.splitlines()
    assert out[0].startswith(osp.dirname(osp.dirname(user_env['bin'])))  # not the checkout
    # RTMDet's own custom_hooks (EMA, pipeline switch) stay beside the runtime's lines.
    assert out[1] == ("{'seed': 5, 'deterministic': True} ['mmrepro'] RTMDet "
                      "['EMAHook', 'PipelineSwitchHook']")
    assert out[2] == "YOLOX {'seed': 0, 'deterministic': True}"


#: A team's config as README shows it: MMDetection's bases, the team's own data and
#: schedule (here copies of mmrepro's demo ones), and mmrepro's runtime lines by package
#: path. Only ``repro_runtime.py`` is inherited through ``mmrepro::``: MMEngine builds
#: whatever a ``pkg::`` base defines in the registry scope ``pkg``, and mmrepro has no
#: registries of its own (``repro_runtime.py`` defines nothing that is built).
USER_CONFIG = """_base_ = [
    'mmdet::_base_/models/retinanet_r50_fpn.py',
    './_base_/tiny_coco.py',
    './_base_/schedule_3e_tiny.py',
    'mmdet::_base_/default_runtime.py',
    'mmrepro::_base_/repro_runtime.py',
]
model = dict(backbone=dict(depth=18, init_cfg=None), neck=dict(in_channels=[64, 128, 256, 512]),
             bbox_head=dict(num_classes=3))
"""
#: No ReproducibilityHook in the test config's hooks: only the inherited
#: ``custom_imports`` of ``repro_runtime.py`` enables mmrepro.
RUNTIME_LINES_ONLY = """
custom_hooks = [dict(type='CheckpointHook', by_epoch=False, interval=10, save_last=False)]
"""
#: Loads a config in a fresh process that has not imported mmrepro, as MMDetection's
#: tools/train.py does (``Config.fromfile`` first; its ``custom_imports`` import mmrepro).
#: Then the registry scopes of every shipped zoo config inherited through ``mmrepro::``.
SCOPE_PROBE = """
import glob, os.path as osp, sys
from mmengine.config import Config
cfg = Config.fromfile('runtime_only.py', import_custom_modules=False)
print('mmrepro' in sys.modules, cfg.randomness, cfg.custom_imports.imports)
Config.fromfile('runtime_only.py')
print('mmrepro' in sys.modules)

def scopes(node):
    if isinstance(node, dict):
        return {node.get('_scope_')}.union(*map(scopes, node.values()))
    if isinstance(node, (list, tuple)):
        return set().union(*map(scopes, node))
    return set()

import mmrepro.configs
for path in sorted(glob.glob(osp.join(mmrepro.configs.CONFIG_ROOT, 'zoo', '*.py'))):
    with open('zoo_child.py', 'w') as f:
        f.write(f"_base_ = 'mmrepro::zoo/{osp.basename(path)}'")
    cfg = Config.fromfile('zoo_child.py').to_dict()  # zoo_*: zoo_tiny.py's parts, not built
    print(osp.basename(path), sorted(map(str, scopes({k: v for k, v in cfg.items()
                                                      if not k.startswith('zoo_')}))))
"""


def test_mmrepro_configs_resolve_before_mmrepro_is_imported(user_env):
    """``mmrepro::`` resolves in a process that has not imported mmrepro (the wheel's
    ``.pth`` file); whatever the inherited zoo configs build is built in mmdet's scope."""
    outside = user_env['outside']
    with open(osp.join(outside, 'runtime_only.py'), 'w') as f:
        f.write("_base_ = 'mmrepro::_base_/repro_runtime.py'\n")
    out = _run(user_env['python'], '-c', SCOPE_PROBE, cwd=outside).stdout.splitlines()
    assert out[:2] == ["False {'seed': 0, 'deterministic': True} ['mmrepro']", 'True']
    assert len(out[2:]) == 12 and all(line.endswith("['None', 'mmdet']") for line in out[2:]), \
        out[2:]


def _user_config(tmp_path, monkeypatch, data_root: str, max_epochs: int) -> str:
    """A narrowed test config (:func:`repro_utils.write_config`) over :data:`USER_CONFIG`."""
    base = tmp_path / 'user_retinanet.py'
    base.write_text(USER_CONFIG)
    (tmp_path / '_base_').mkdir()
    for part in ('datasets/tiny_coco.py', 'schedule_3e_tiny.py'):
        shutil.copy(osp.join(REPO, 'configs', '_base_', part), tmp_path / '_base_')
    monkeypatch.setitem(repro_utils.CONFIGS, 'user', str(base))
    monkeypatch.setitem(repro_utils.NARROW, 'user', repro_utils.NARROW['retinanet'])
    return write_config(str(tmp_path / 'cfg' / 'user.py'), 'user', data_root,
                        extra=RUNTIME_LINES_ONLY, max_epochs=max_epochs)


def _mmdet_train(env: dict, config: str, work_dir: str, *args: str) -> str:
    """Train with the environment's own MMDetection ``tools/train.py`` (from its package)."""
    mmdet = _run(env['python'], '-c', "import importlib.util as u; print(u.find_spec('mmdet')"
                 ".origin)", cwd=env['outside']).stdout.strip()
    script = osp.join(osp.dirname(mmdet), '.mim', 'tools', 'train.py')
    proc = _run(env['python'], script, config, '--work-dir', work_dir, *args,
                cwd=env['outside'])
    return proc.stdout + proc.stderr


@pytest.mark.slow
def test_mmdet_train_py_trains_a_config_inheriting_mmrepro(user_env, tmp_path, monkeypatch,
                                                           data_root):
    config = _user_config(tmp_path, monkeypatch, data_root, max_epochs=1)
    out = _mmdet_train(user_env, config, str(tmp_path / 'run'))
    assert 'mmrepro: added ReproducibilityHook to custom_hooks' in out
    assert osp.isfile(tmp_path / 'run' / 'epoch_1.pth')


#: The team's older packages: pure-Python wheels, over this stack's torch and mmcv.
OLD_STACK = tuple(os.environ.get('MMREPRO_OLD_STACK', 'mmengine==0.9.1 mmdet==3.2.0').split())


def _old_wheels() -> list:
    """The wheels of :data:`OLD_STACK`, downloaded from PyPI once into the cache."""
    cache = osp.join(env_home(), 'wheels', 'pypi')
    wheels = []
    for pin in OLD_STACK:
        prefix = pin.replace('==', '-') + '-'
        found = [n for n in os.listdir(cache) if n.startswith(prefix)] \
            if osp.isdir(cache) else []
        if not found:
            proc = _run(sys.executable, '-m', 'pip', 'download', '--no-deps', '-q', '-d',
                        cache, pin, cwd=REPO, check=False)
            if proc.returncode != 0:
                pytest.skip(f'cannot download {pin} from PyPI: {proc.stderr[-500:]}')
            found = [n for n in os.listdir(cache) if n.startswith(prefix)]
        wheels.append(osp.join(cache, sorted(found)[0]))
    return wheels


@pytest.fixture(scope='module')
def old_env(tmp_path_factory, wheel) -> dict:
    """The wheel installed into a user environment holding :data:`OLD_STACK`."""
    root = tmp_path_factory.mktemp('install-old')
    outside = root / 'elsewhere'
    outside.mkdir()
    python = _user_venv(root, 'old', *_old_wheels())
    return _install_mmrepro(python, wheel, str(outside))


def test_install_beside_an_older_mmengine_and_mmdet_changes_neither(old_env):
    before, after = old_env['before'], old_env['after']
    pins = dict(pin.split('==') for pin in OLD_STACK)
    assert {k: before[k] for k in pins} == pins, before
    assert before['mmrepro'] is None and after['mmrepro'] is not None
    assert {k: after[k] for k in KEPT} == {k: before[k] for k in KEPT}
    probe = _run(old_env['python'], '-c', 'import mmengine, mmdet; print(mmengine.__version__, '
                 'mmdet.__version__)', cwd=old_env['outside']).stdout.split()
    assert probe == [pins['mmengine'], pins['mmdet']]


@pytest.mark.slow
def test_older_stack_resumes_mid_epoch_exactly(old_env, tmp_path, monkeypatch, data_root):
    """MMDetection's own tools/train.py of the older release, on a config that inherits
    ``mmrepro::_base_/repro_runtime.py``: a resume from iteration 10 (an epoch's middle),
    in a new process, ends with the uninterrupted run's weights, byte for byte."""
    config = _user_config(tmp_path, monkeypatch, data_root, max_epochs=2)
    runs = {name: str(tmp_path / name) for name in ('full', 'resumed')}
    out = _mmdet_train(old_env, config, runs['full'])
    assert 'mmrepro: the Runner is ReproRunner' in out  # runner_type, through RUNNERS
    assert 'mmrepro: added ReproducibilityHook to custom_hooks' in out
    out = _mmdet_train(old_env, config, runs['resumed'], '--resume',
                       osp.join(runs['full'], 'iter_10.pth'))
    assert 'mmrepro: resumed RNG states and data position' in out
    digests = {name: state_digest(osp.join(path, 'epoch_2.pth')) for name, path in runs.items()}
    assert len(set(digests.values())) == 1, digests
    record = glob.glob(osp.join(runs['full'], '*', 'run_record.json'))[0]
    with open(record) as f:
        versions = json.load(f)['versions']
    pins = dict(pin.split('==') for pin in OLD_STACK)
    assert {k: versions[k] for k in pins} == pins, versions
