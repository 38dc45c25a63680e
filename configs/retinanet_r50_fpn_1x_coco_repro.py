# MMDetection's RetinaNet R50-FPN 1x COCO baseline, reproducible: same weights on a
# rerun, with any num_workers, after resume. Share this file with your team.
_base_ = ['mmdet::retinanet/retinanet_r50_fpn_1x_coco.py', './_base_/repro_runtime.py']
