"""The data fingerprint on a real MMSegmentation dataset: label maps count."""
from __future__ import annotations

import shutil
from importlib import metadata

import cv2
import pytest
from mmengine.config import Config
from support.toy_runner import recording_runner

from mmrepro.cli.repro_diff import main as repro_diff
from mmrepro.demo import SEG_CLASSES
from mmrepro.record.fingerprint import check_mode, data_fingerprint
from mmrepro.record.run_record import collect_run_record, write_run_record
from mmrepro.run.settings import RunSettings

mmseg = pytest.importorskip('mmseg', reason='mmsegmentation is not installed '
                            '(tools/setup_env.sh installs it)')


def _dataset(root):
    from mmseg.datasets import BaseSegDataset
    return BaseSegDataset(data_root=str(root), img_suffix='.png', seg_map_suffix='.png',
                          data_prefix=dict(img_path='img_dir/train',
                                           seg_map_path='ann_dir/train'),
                          metainfo=dict(classes=SEG_CLASSES),
                          pipeline=[])


@pytest.fixture
def seg_data(tmp_path, seg_data_root):
    """Two copies of the tiny segmentation set in different directories."""
    shutil.copytree(seg_data_root, tmp_path / 'a')
    shutil.copytree(tmp_path / 'a', tmp_path / 'b')
    return tmp_path / 'a', tmp_path / 'b'


def _edit(path, value):
    """Write ``value`` into one pixel of an image or label map (same dimensions)."""
    img = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    img[5, 5] = value
    cv2.imwrite(str(path), img)


def test_label_maps_by_content_images_by_size(seg_data):
    a, b = seg_data
    base = data_fingerprint(_dataset(a))
    assert data_fingerprint(_dataset(b)) == base  # same data, other directory
    assert base['files']['seg_map_path']['by'] == 'content'
    assert base['files']['img_path']['by'] == 'size'
    assert base['files']['seg_map_path']['count'] == base['num_samples'] == 8
    _edit(b / 'ann_dir' / 'train' / '003.png', 2)  # one label pixel
    changed = data_fingerprint(_dataset(b))
    assert changed['files']['seg_map_path']['sha256'] != base['files']['seg_map_path']['sha256']
    assert changed['files']['img_path'] == base['files']['img_path']
    assert changed['images_sha256'] == base['images_sha256']


def test_content_mode_reads_images_too(seg_data):
    a, b = seg_data
    base = data_fingerprint(_dataset(a), 'content')
    _edit(b / 'img_dir' / 'train' / '001.png', (9, 9, 9))
    changed = data_fingerprint(_dataset(b), 'content')
    assert changed['files']['img_path']['sha256'] != base['files']['img_path']['sha256']
    assert changed['files']['seg_map_path'] == base['files']['seg_map_path']
    stat = data_fingerprint(_dataset(a), 'stat')
    assert stat['mode'] == 'stat' and stat['files']['seg_map_path']['by'] == 'size'


def test_bad_mode_names_the_value():
    with pytest.raises(ValueError, match=r"ReproducibilityHook\(fingerprint='full'\): expected "
                       r"one of \('labels', 'content', 'stat'\)"):
        check_mode('full')


def _record(tmp_path, name, dataset):
    log_dir = tmp_path / name / '20260101_000000'
    log_dir.mkdir(parents=True)
    runner = recording_runner(Config(dict(model=dict(type='EncoderDecoder'))), tmp_path / name,
                              log_dir, dataset, RunSettings(seed=0, deterministic=True))
    record = collect_run_record(runner)
    write_run_record(runner, record)
    return record


def test_run_record_versions_and_repro_diff_names_a_changed_label_map(seg_data, tmp_path,
                                                                      capsys):
    a, b = seg_data
    record = _record(tmp_path, 'run_a', _dataset(a))
    assert record['versions']['mmsegmentation'] == metadata.version('mmsegmentation')
    assert record['versions']['mmdet'] == metadata.version('mmdet')
    _edit(b / 'ann_dir' / 'train' / '006.png', 1)
    _record(tmp_path, 'run_b', _dataset(b))
    code = repro_diff([str(tmp_path / 'run_a'), str(tmp_path / 'run_b')])
    out = capsys.readouterr().out
    assert code == 1
    assert 'data: 1 fingerprint value(s) differ: the training data differs' in out
    assert 'files.seg_map_path.sha256: ' in out
