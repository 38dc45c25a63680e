"""The model zoo: every family's mmdet config trains bit-exactly (the support matrix).

Session-scoped calls of :func:`run_family_checks` run ``check_repro`` on all twelve zoo
configs (two runs each through ``tools/train.py``, two families at a time; RTMDet and
YOLOX once, with the num_workers and mid-epoch resume checks as well); the per-family
tests read their results. That sweep is the full tier (marker ``full``): it measures the
matrix, whose claims CI's default run proves once each elsewhere (rerun, ``num_workers``
and mid-epoch resume on RetinaNet and Faster R-CNN, Mosaic and MixUp across workers in
``test_data_randomness.py``, EMA and the pipeline switch across a resume in
``test_resume.py``). The tool itself, writing a table, runs in the default tier.
"""
from __future__ import annotations

import importlib.util
import os
import os.path as osp
import shutil

import pytest
from support.repro_utils import REPO

from mmrepro.checks.matrix import run as sm
from mmrepro.cli.support_matrix import main as matrix_main

#: What the audit replaces in each family (and nothing stays nondeterministic).
REPLACED = {
    'faster-rcnn': ['RoIAlign x4'],
    'mask-rcnn': ['RoIAlign x8'],
    'cascade-rcnn': ['RoIAlign x12'],
    'retinanet': [],
    'fcos': [],
    'atss': [],
    'yolox': [],
    'rtmdet': ['AdaptiveAvgPool2d x4'],
    'dcn-faster-rcnn': ['DeformConv2dPack x13', 'RoIAlign x4'],
    'deformable-detr': ['MultiScaleDeformableAttention x3'],
    'dino': ['MultiScaleDeformableAttention x3'],
    'mask2former': ['Mask2FormerHead x1', 'MultiScaleDeformableAttention x1'],
}
#: The measured matrix on CPU, and the columns the docs restate per family.
RESULTS = osp.join(REPO, 'benchmarks', 'results', 'support_matrix_cpu.md')
COLUMNS = ('rerun', 'num_workers', 'resume mid-epoch', 'resume every epoch')
#: Every run reads its data from the session's generated dataset, one process per run.
RUN_OPTIONS = ('train_dataloader.num_workers=0', 'train_dataloader.persistent_workers=False')


@pytest.fixture(scope='session')
def mixing_results(tmp_path_factory, data_root):
    """RTMDet and YOLOX: rerun, num_workers 0 vs 2, resumed mid-epoch (check_repro)."""
    results = sm.run_family_checks(('rtmdet', 'yolox'), iters=4, jobs=1, data_root=data_root,
                                   work_dir=str(tmp_path_factory.mktemp('mixing')),
                                   cfg_options=RUN_OPTIONS, keep_checkpoints=False,
                                   checks=('workers', 'resume'))
    return {r.family: r for r in results}


@pytest.fixture(scope='session')
def zoo_results(tmp_path_factory, data_root, mixing_results):
    """Every family: the rerun check; RTMDet's and YOLOX's from ``mixing_results``."""
    others = [family for family in sm.FAMILIES if family not in mixing_results]
    results = sm.run_family_checks(others, iters=2, jobs=2, data_root=data_root,
                                   work_dir=str(tmp_path_factory.mktemp('zoo')),
                                   cfg_options=RUN_OPTIONS, keep_checkpoints=False, checks=())
    return {**{r.family: r for r in results}, **mixing_results}


@pytest.mark.slow
@pytest.mark.full
@pytest.mark.parametrize('family', ['rtmdet', 'yolox'])
def test_mosaic_families_are_exact_across_workers_and_mid_epoch_resume(family,
                                                                       mixing_results):
    result = mixing_results[family]
    assert result.error is None
    assert (result.identical, result.workers, result.resume) == (True, 'yes', 'yes')
    assert result.epochs is None and result.bit_exact


@pytest.mark.slow
@pytest.mark.full
@pytest.mark.parametrize('family', sm.FAMILIES)
def test_family_trains_bit_exactly_on_cpu(family, zoo_results):
    result = zoo_results[family]
    assert result.error is None
    assert result.identical and result.weights_identical and result.bit_exact
    assert result.replaced == REPLACED[family]
    assert result.remaining == [] and result.alerts == []
    assert result.device == 'cpu' and result.speed_ratio is None


@pytest.mark.slow
@pytest.mark.full
def test_table_rows(zoo_results):
    table = sm.format_table([zoo_results['rtmdet'], zoo_results['mask2former']]).splitlines()
    assert table[0].startswith('| family | mmdet 3.3 config | rerun | num_workers | '
                               'resume mid-epoch | resume every epoch |')
    assert table[2] == ('| rtmdet | `rtmdet/rtmdet_tiny_8xb32-300e_coco.py` | yes | yes | yes '
                        '| - | AdaptiveAvgPool2d x4 | none | none | n/a |')
    assert table[3] == ('| mask2former | `mask2former/mask2former_r50_8xb2-lsj-50e_coco.py` | '
                        'yes | - | - | - | Mask2FormerHead x1, MultiScaleDeformableAttention x1 '
                        '| none | none | n/a |')


def _run_cli(tmp_path, data_root, families) -> str:
    """The matrix CLI on ``families`` (2-iteration reruns) over a copy of the demo data
    (the other codebases' data is derived in it); the table it wrote."""
    data = str(tmp_path / 'data')
    shutil.copytree(data_root, data)
    out = tmp_path / 'matrix.md'
    status = matrix_main(['--families', *families, '--iters', '2', '--checks',
                          '--data-root', data, '--work-dir', str(tmp_path / 'work'),
                          '--out', str(out), '--discard-checkpoints',
                          '--cfg-options', *RUN_OPTIONS])
    assert status == 0
    return out.read_text()


@pytest.mark.slow
def test_cli_writes_the_table(tmp_path, data_root, capsys):
    text = _run_cli(tmp_path, data_root, ['fcos'])
    assert text.startswith('# Support matrix on cpu\n\nMeasured by `python '
                           'tools/support_matrix.py --families fcos --iters 2 --jobs 1 '
                           '--checks  --epochs 4` on ')
    assert f' {os.cpu_count()} CPU cores: torch ' in text.splitlines()[2]
    assert text.endswith('| fcos | `fcos/fcos_r50-caffe_fpn_gn-head_1x_coco.py` | yes | - | - '
                         '| - | - | none | none | n/a |\n')
    run_b = tmp_path / 'work' / 'fcos' / 'run_b'
    assert osp.isfile(run_b / 'last_checkpoint') and not osp.exists(run_b / 'iter_2.pth')
    assert 'fcos: bit-exact' in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.full
@pytest.mark.skipif(importlib.util.find_spec('mmpretrain') is None,
                    reason='mmpretrain is not in this stack (the current stack has it)')
def test_cli_checks_another_codebases_family_beside_the_zoos(tmp_path, data_root):
    """Its config written into the work dir, over data derived from the demo dataset;
    the column names each family's package. Full tier: the measured tables of the other
    codebases' families are kept by the docs test below, their configs by the unit
    tests."""
    text = _run_cli(tmp_path, data_root, ['fcos', 'mmpretrain-resnet'])
    assert '| family | zoo config | rerun |' in text
    assert text.endswith(
        '| fcos | `mmdet::fcos/fcos_r50-caffe_fpn_gn-head_1x_coco.py` | yes | - | - | - | - '
        '| none | none | n/a |\n| mmpretrain-resnet | `mmpretrain::_base_/models/resnet18.py` '
        '| yes | - | - | - | AdaptiveAvgPool2d x1 | none | none | n/a |\n')
    assert osp.isfile(tmp_path / 'work' / 'codebase_configs' / 'mmpretrain-resnet.py')
    assert osp.isfile(tmp_path / 'data' / 'codebases' / 'keypoints' / 'train.json')


def _table(text: str) -> dict:
    """A Markdown table's rows: first cell -> {column: cell}."""
    lines = [line for line in text.splitlines() if line.startswith('|')]
    header = [cell.strip() for cell in lines[0].strip('|').split('|')]
    rows = {}
    for line in lines[2:]:
        cells = [cell.strip() for cell in line.strip('|').split('|')]
        rows[cells[0].strip('`')] = dict(zip(header, cells, strict=True))
    return rows


def test_docs_state_what_the_matrix_measured():
    with open(RESULTS) as f:
        measured = f.read()
    rows = _table(measured)
    assert sorted(rows) == sorted(sm.FAMILIES)
    table = '\n'.join(line for line in measured.splitlines() if line.startswith('|'))
    with open(osp.join(REPO, 'docs', 'gpu.md')) as f:
        assert table in f.read()  # the measured table, verbatim
    with open(osp.join(REPO, 'docs', 'guarantees.md')) as f:
        stated = _table(f.read().split('## Per family')[1])
    assert sorted(stated) == sorted(sm.FAMILIES)
    for family in sm.FAMILIES:  # yes / NO per column, as measured
        assert ([stated[family][c].split()[0] for c in COLUMNS]
                == [rows[family][c].split()[0].rstrip(':') for c in COLUMNS]), family
    every_yes = all(rows[f][c].startswith('yes') for f in sm.FAMILIES for c in COLUMNS)
    with open(osp.join(REPO, 'README.md')) as f:  # README's one-line summary of it
        claims_all = ('All twelve zoo families, RTMDet and YOLOX included, measured exact on '
                      'CPU across reruns,\n`num_workers` and resume from every epoch and '
                      'mid-epoch') in f.read()
    assert claims_all == every_yes


def test_docs_state_what_the_matrix_measured_on_the_other_codebases():
    """Each other codebase's family has its measured row (every column exact), and the
    docs show each measured table verbatim."""
    with open(osp.join(REPO, 'docs', 'codebases.md')) as f:
        docs = f.read()
    rows = {}
    for name in ('support_matrix_codebases_cpu.md', 'support_matrix_mmyolo_cpu.md'):
        with open(osp.join(REPO, 'benchmarks', 'results', name)) as f:
            measured = f.read()
        rows.update(_table(measured))
        assert '\n'.join(line for line in measured.splitlines()
                         if line.startswith('|')) in docs, name
    assert sorted(rows) == sorted(sm.CODEBASE_FAMILIES)
    assert all(rows[f][c].startswith('yes') for f in rows for c in COLUMNS)
