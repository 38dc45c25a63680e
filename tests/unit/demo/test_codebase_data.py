"""mmrepro.demo.codebase_data: the other codebases' data, derived from the demo dataset."""
import json
import os
import os.path as osp

from mmrepro.demo import CLASSES, derive_codebase_data


def test_each_codebase_gets_its_format_of_the_demo_images_and_boxes(data_root, tmp_path):
    with open(osp.join(data_root, 'annotations', 'train.json')) as f:
        coco = json.load(f)
    data = str(tmp_path / 'derived')
    derive_codebase_data(data_root, data)
    derive_codebase_data(data_root, data)  # again: the same files, nothing refused

    # mmpretrain: each image with a box, once, linked in its largest box's class folder.
    linked = {name: cls for cls in CLASSES for name in os.listdir(osp.join(data, 'cls', cls))}
    with_boxes = {a['image_id'] for a in coco['annotations']}
    names = {i['id']: i['file_name'] for i in coco['images']}
    assert sorted(linked) == sorted(names[i] for i in with_boxes)
    first = coco['annotations'][0]
    largest = max((a for a in coco['annotations'] if a['image_id'] == first['image_id']),
                  key=lambda a: a['area'])
    assert linked[names[first['image_id']]] == CLASSES[largest['category_id'] - 1]
    assert osp.samefile(osp.join(data, 'cls', linked[names[first['image_id']]],
                                 names[first['image_id']]),
                        osp.join(data_root, 'images', names[first['image_id']]))

    # mmrotate: every image, and one DOTA line a box: its corners, its class, not difficult.
    assert sorted(os.listdir(osp.join(data, 'dota', 'images'))) == sorted(names.values())
    stem = osp.splitext(names[first['image_id']])[0]
    with open(osp.join(data, 'dota', 'annfiles', stem + '.txt')) as f:
        lines = f.read().splitlines()
    x, y, w, h = first['bbox']
    assert lines[0] == (' '.join(f'{v:g}' for v in (x, y, x + w, y, x + w, y + h, x, y + h))
                        + f" {CLASSES[first['category_id'] - 1]} 0")
    assert len(lines) == sum(a['image_id'] == first['image_id'] for a in coco['annotations'])

    # mmpose: one visible 17-keypoint person a box, inside it.
    with open(osp.join(data, 'keypoints', 'train.json')) as f:
        people = json.load(f)
    assert people['categories'] == [dict(id=1, name='person')]
    assert len(people['annotations']) == len(coco['annotations'])
    person = people['annotations'][0]
    assert person['bbox'] == first['bbox'] and person['num_keypoints'] == 17
    points = person['keypoints']
    assert points[2::3] == [2] * 17
    assert all(x <= px <= x + w for px in points[0::3])
    assert all(y <= py <= y + h for py in points[1::3])
