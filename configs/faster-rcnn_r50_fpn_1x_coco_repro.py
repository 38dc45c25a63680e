# MMDetection's Faster R-CNN R50-FPN 1x COCO baseline, reproducible: same weights on a rerun, with any
# num_workers, after resume, and the same data on any number of GPUs. Share this file
# with your team: it needs only mmdet and mmrepro installed (pip), nothing beside it.
_base_ = ['mmdet::faster_rcnn/faster-rcnn_r50_fpn_1x_coco.py',
          'mmrepro::_base_/repro_runtime.py']
# The baseline's samples per optimizer step: 8 GPUs x 2 images. On fewer GPUs raise
# optim_wrapper.accumulative_counts so that batch_size x GPUs x accumulative_counts
# stays 16; any other layout is refused with the line that says what to set.
randomness = dict(global_batch=16)
