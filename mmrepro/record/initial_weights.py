"""The run record's ``initial`` section: what the model starts from.

Teammates fetch pretrained files from their own downloads and caches, and the files can
differ under one name: a re-uploaded torchvision model, MMEngine's ``load_url`` reusing
any cached file of the same name without checking its hash, ``open_mmlab.json`` in
``$MMENGINE_HOME`` redirecting an ``open-mmlab://`` name. So every file the model is
initialised from is recorded by what it holds, not by its name:

- each ``Pretrained`` ``init_cfg`` of the model's modules (``model.backbone.init_cfg``),
  and ``load_from`` when the run does not resume;
- each name resolved as MMEngine's checkpoint loader resolves it
  (:func:`resolve_checkpoint`: ``torchvision://``, ``open-mmlab://``, ``mmcls://`` and
  http(s) names to the file in the torch hub cache or ``$MMENGINE_HOME``);
- for each file: the name as given, the file read (a location: not compared), its size
  and sha256, a digest of the tensors it gives the module (by name, dtype, shape and
  bytes: :func:`mmrepro.resume.digests.weights_digest`), and how many of the module's
  weights it misses, how many of its own the module has no place for, and how many have
  another shape;
- ``model_sha256``: the digest of the model's weights after initialisation and loading,
  right before the first step, as a checkpoint would hold them.

The files are read again for the record, right before the first step, when MMEngine
has read (and downloaded) them (with ``weights_only`` loading and mmrepro's
allow-list), mirroring MMEngine's ``PretrainedInit`` (its ``prefix``) and
``Runner.load_checkpoint`` (``revise_keys`` stripping ``module.``; a missing
``num_batches_tracked`` is not counted, as MMEngine does not). Reading a ResNet-50
takes a fraction of a second (``benchmarks/results/provenance_cpu.md``).
"""
from __future__ import annotations

import os
import os.path as osp
import re
from typing import Any, Dict, Iterator, List, Optional, Tuple
from urllib.parse import urlparse

from ..resume.digests import weights_digest
from .fingerprint import file_sha256

#: The record's section.
SECTION = 'initial'
#: Source name of ``load_from``.
LOAD_FROM = 'load_from'
#: Name prefixes that MMEngine resolves through a model list to a URL or a file.
_TORCHVISION = ('torchvision://', 'modelzoo://')
_OPENMMLAB = ('open-mmlab://', 'openmmlab://')
_MMCLS = 'mmcls://'
_HTTP = ('http://', 'https://')


def _hub_file(url: str) -> str:
    """Where ``load_url`` keeps ``url``: the torch hub cache, by the URL's file name."""
    import torch.hub
    return osp.join(torch.hub.get_dir(), 'checkpoints', osp.basename(urlparse(url).path))


def resolve_checkpoint(name: str) -> Tuple[Optional[str], str]:
    """The local file MMEngine's checkpoint loader reads for ``name``.

    Args:
        name: A checkpoint name as a config gives it (a path, a URL, or a
            ``torchvision://``, ``open-mmlab://`` or ``mmcls://`` name).

    Returns:
        tuple: ``(file, how)``: the file (None where the name is not resolved: an
        unknown model name, or a storage scheme such as ``s3://``) and how it was found.
    """
    from mmengine.runner import checkpoint as ckpt
    if name.startswith(_TORCHVISION):
        model = name.split('://', 1)[1]
        try:
            url = ckpt.get_torchvision_models().get(model)
        except ImportError:
            return None, 'torchvision is not installed (MMEngine reads its model list)'

        return (_hub_file(url), f'torchvision model {model}: {url}') if url else \
            (None, f'no torchvision model named {model!r}')
    if name.startswith(_OPENMMLAB):
        model = name.split('://', 1)[1]
        model = ckpt.get_deprecated_model_names().get(model, model)
        target = ckpt.get_external_models().get(model)
        if target is None:
            return None, f'no OpenMMLab model named {model!r}'
        if target.startswith(_HTTP):
            return _hub_file(target), f'OpenMMLab model {model}: {target}'
        return osp.join(ckpt._get_mmengine_home(), target), \
            f'OpenMMLab model {model}: {target} in MMENGINE_HOME'
    if name.startswith(_MMCLS):
        model = name[len(_MMCLS):]
        url = ckpt.get_mmcls_models().get(model)
        return (_hub_file(url), f'mmcls model {model}: {url}') if url else \
            (None, f'no mmcls model named {model!r}')
    if name.startswith(_HTTP):
        return _hub_file(name), f'download cache of {name}'
    if '://' in name:
        return None, f'{name.split("://", 1)[0]}:// storage is not read for the record'
    return osp.expanduser(name), 'local file'


def pretrained_inits(model: Any) -> Iterator[Tuple[str, str, Optional[str], Any]]:
    """``(source, checkpoint name, prefix, module)`` of every ``Pretrained`` init_cfg.

    Args:
        model: The model (unwrapped), built on any device (the meta device too).
    """
    for module_name, module in model.named_modules():
        init_cfg = getattr(module, 'init_cfg', None)
        for cfg in init_cfg if isinstance(init_cfg, (list, tuple)) else [init_cfg]:
            if not isinstance(cfg, dict) or cfg.get('type') not in ('Pretrained',
                                                                   'PretrainedInit'):
                continue
            if cfg.get('checkpoint'):
                where = f'model.{module_name}' if module_name else 'model'
                yield f'{where}.init_cfg', str(cfg['checkpoint']), cfg.get('prefix'), module


def _state_of(checkpoint: Any, name: str, prefix: Optional[str]) -> Dict[str, Any]:
    """The tensors a load gives the module, named as the module names them."""
    state = checkpoint.get('state_dict', checkpoint) if isinstance(checkpoint, dict) else {}
    if name.startswith(_MMCLS):
        from mmengine.runner.checkpoint import _process_mmcls_checkpoint
        state = _process_mmcls_checkpoint(checkpoint)['state_dict']
    if prefix:
        start = prefix if prefix.endswith('.') else prefix + '.'
        return {k[len(start):]: v for k, v in state.items() if k.startswith(start)}
    return {re.sub(r'^module\.', '', str(k)): v for k, v in state.items()}


def file_entry(name: str, module: Any, prefix: Optional[str] = None) -> Dict[str, Any]:
    """What one checkpoint file gives ``module`` (see the module docstring).

    Never raises: a file that cannot be found or read is recorded with an ``error``.
    """
    file, how = resolve_checkpoint(name)
    entry: Dict[str, Any] = dict(name=name, resolved=file, how=how)
    if file is None or not osp.isfile(file):
        entry['error'] = 'not resolved' if file is None else 'no such file'
        return entry
    entry.update(size=os.stat(file).st_size, sha256=file_sha256(file))
    from ..resume.checkpoint_io import peek
    try:  # memory-mapped where the format allows (legacy files are read whole)
        state = _state_of(peek(file), name, prefix)
    except Exception as err:  # the file is recorded by its bytes all the same
        entry['error'] = f'{type(err).__name__}: not loadable with weights_only'
        return entry
    own = {k: tuple(v.shape) for k, v in module.state_dict().items()}
    fits = {k: v for k, v in state.items()
            if k in own and hasattr(v, 'shape') and tuple(v.shape) == own[k]}
    entry.update(tensors_sha256=weights_digest(dict(state_dict=fits)), loaded=len(fits),
                 missing=len([k for k in own if k not in state  # as MMEngine counts them
                              and not k.endswith('num_batches_tracked')]),
                 unexpected=len([k for k in state if k not in own]),
                 mismatched=len([k for k in state if k in own and k not in fits]))
    return entry


def initial_files(model: Any, load_from: Optional[str], resuming: bool
                  ) -> Dict[str, Dict[str, Any]]:
    """``{source: file entry}`` of every file the model is initialised from, in order.

    Args:
        model: The model (a wrapper is unwrapped).
        load_from: The run's ``load_from`` (None: none).
        resuming: The run resumes (``load_from`` is then the checkpoint it resumes).
    """
    from mmengine.model import is_model_wrapper
    model = model.module if is_model_wrapper(model) else model
    out = {source: file_entry(name, module, prefix)
           for source, name, prefix, module in pretrained_inits(model)}
    if load_from and not resuming:
        out[LOAD_FROM] = file_entry(str(load_from), model)
    return out


def model_digest(model: Any) -> str:
    """The digest of the model's weights, as a checkpoint's ``state_dict`` holds them."""
    from mmengine.model import is_model_wrapper
    from mmengine.runner.checkpoint import weights_to_cpu
    model = model.module if is_model_wrapper(model) else model
    return weights_digest(dict(state_dict=weights_to_cpu(model.state_dict())))


def changed_files(a: Dict[str, Any], b: Dict[str, Any],
                  names: Tuple[str, str] = ('run A', 'run B')) -> List[str]:
    """How the files of two ``initial`` sections differ, one text per source.

    Args:
        a: The baseline's (or run A's) section.
        b: The other run's.
        names: What the two are called (``only in run A``).
    """
    files_a, files_b = a.get('files') or {}, b.get('files') or {}
    out = []
    for source in list(files_a) + [s for s in files_b if s not in files_a]:
        ea, eb = files_a.get(source), files_b.get(source)
        if ea is None or eb is None:
            there = names[0] if eb is None else names[1]
            out.append(f'{source} {(ea or eb).get("name")}: only in {there}')
            continue
        if not (ea.get('sha256') and eb.get('sha256')):  # a file one side could not read
            if ea.get('error') != eb.get('error'):
                text = (f"{source} {eb.get('name')}: {ea.get('error') or 'read'} "
                        f"({names[0]}) vs {eb.get('error') or 'read'} ({names[1]})")
                if ea.get('sha256'):
                    text += (f"; expected sha256 {str(ea.get('sha256'))[:12]} at "
                             f"{eb.get('resolved')}")
                out.append(text)
            continue
        if ea.get('sha256') != eb.get('sha256'):
            out.append(f"{source} {eb.get('name')}, sha256 {str(ea.get('sha256'))[:12]} vs "
                       f"{str(eb.get('sha256'))[:12]}")
        elif ea.get('tensors_sha256') != eb.get('tensors_sha256') or any(
                ea.get(k) != eb.get(k) for k in ('missing', 'unexpected', 'mismatched')):
            out.append(f"{source} {eb.get('name')}: the same file, loaded otherwise "
                       f"(missing {ea.get('missing')} vs {eb.get('missing')}, unexpected "
                       f"{ea.get('unexpected')} vs {eb.get('unexpected')})")
    return out


def initial_differences(a: Optional[Dict[str, Any]], b: Optional[Dict[str, Any]]
                        ) -> List[str]:
    """How the weights two runs start from differ (empty: alike, or not recorded).

    Args:
        a: Run A's record (None: none).
        b: Run B's record.

    Returns:
        list: The differing files (:func:`changed_files`), else the differing digests of
        the model before the first step.
    """
    sa, sb = (a or {}).get(SECTION), (b or {}).get(SECTION)
    if not isinstance(sa, dict) or not isinstance(sb, dict):
        return []
    out = changed_files(sa, sb)
    ma, mb = sa.get('model_sha256'), sb.get('model_sha256')
    if not out and ma and mb and ma != mb:
        out.append(f"the model's weights before the first step: sha256 {ma[:12]} vs "
                   f'{mb[:12]} (the same files: the random initialisation differs)')
    return out
