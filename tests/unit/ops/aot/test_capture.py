"""What the ahead-of-time tier covers: every jit function, launched or called."""
from __future__ import annotations

import glob
import os.path as osp

from support.repro_utils import REPO

from mmrepro.ops.aot.capture import Variant, jit_functions, uncovered

OPS = osp.join(REPO, 'mmrepro', 'ops')

KERNELS = '''
import triton
import triton.language as tl

@triton.jit
def helper(x):
    return x + 1

@triton.jit
def launched(x, BLOCK: tl.constexpr):
    tl.store(x, helper(tl.load(x)))

@triton.jit(do_not_specialize=['n'])
def added_later(x, n):
    tl.store(x, n)
'''


def _variant(name: str) -> Variant:
    return Variant(f'pkg.mod:{name}', (('x', '*fp32'),), (), (), 4)


def test_jit_functions_and_their_calls():
    assert jit_functions(KERNELS) == {'helper': set(), 'launched': {'helper'},
                                      'added_later': set()}


def test_a_kernel_no_variant_launches_is_uncovered():
    assert uncovered({'mod': KERNELS}, [_variant('launched')]) == ['mod.added_later']
    assert uncovered({'mod': KERNELS}, [_variant('launched'), _variant('added_later')]) == []
    # A helper is covered only through a launched caller.
    assert uncovered({'mod': KERNELS}, [_variant('added_later')]) == ['mod.helper',
                                                                      'mod.launched']


def test_mmrepro_ops_define_the_seven_launched_kernels_and_their_helpers():
    found = {osp.basename(p)[:-3]: jit_functions(open(p).read())
             for p in glob.glob(osp.join(OPS, '**', '*.py'), recursive=True)}
    launched = {f'{m}.{f}' for m, graph in found.items() for f in graph
                if not any(f in calls for calls in graph.values())}
    assert launched == {'bilinear_kernels.entries_kernel', 'bilinear_kernels.forward_kernel',
                        'bilinear_kernels.sample_grads_kernel', 'csr_kernels.csr_sum_kernel',
                        'triton_entries.entries_kernel', 'triton_rotated.point_entries_kernel',
                        'triton_rotated.rotated_entries_kernel'}
