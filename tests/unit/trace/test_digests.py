"""mmrepro.trace.digests: exact tensor digests (every bit, dtype and shape count)."""
import numpy as np
import pytest
import torch

from mmrepro import trace as T
from mmrepro.trace import batching, digests

MASK = (1 << 64) - 1


def _hex(tensor, path=''):
    return T.to_hex(T.tensor_digest(tensor, path))


def _reference(tensor: torch.Tensor) -> int:
    """The digest's definition in numpy integers (meta term excluded)."""
    data = tensor.detach().contiguous().reshape(-1).numpy().view(np.uint8)
    padded = np.zeros(-(-data.size // 8) * 8, dtype=np.uint8)
    padded[:data.size] = data
    words = padded.view('<u8')
    with np.errstate(over='ignore'):
        return int(np.sum(words * digests.multipliers(0, words.size), dtype=np.uint64))


def test_multipliers_are_odd_and_differ_by_position():
    mult = digests.multipliers(0, 3 * 65536 + 5)
    assert np.all(mult & np.uint64(1) == 1)
    assert len(np.unique(mult)) == mult.size
    assert np.array_equal(digests.multipliers(65530, 10), mult[65530:65540])


@pytest.mark.parametrize('numel', [1, 7, 1000, 2 * 65536 * 2 + 3, 2 * 65536 * 9 + 2])
def test_digest_matches_its_definition(numel):
    tensor = torch.randn(numel, generator=torch.Generator().manual_seed(numel))
    meta = digests._meta('', tensor)
    assert (T.tensor_digest(tensor) - meta) & MASK == _reference(tensor)


@pytest.mark.parametrize('dtype', [torch.float32, torch.float16, torch.bfloat16,
                                   torch.float64, torch.int64, torch.uint8])
def test_every_single_bit_flip_changes_the_digest(dtype):
    gen = torch.Generator().manual_seed(0)
    base = (torch.randn(3, 67, generator=gen) * 100).to(dtype)
    raw = base.clone().reshape(-1).view(torch.uint8)
    reference = _hex(base)
    # every bit of the first, a middle and the last element, and random others
    positions = list(range(base.element_size() * 8)) + \
        [raw.numel() * 8 - 1 - b for b in range(base.element_size() * 8)] + \
        torch.randint(0, raw.numel() * 8, (200,), generator=gen).tolist()
    for bit in positions:
        flipped = raw.clone()
        flipped[bit // 8] ^= 1 << (bit % 8)
        assert _hex(flipped.view(dtype).view(base.shape)) != reference, (dtype, bit)


def test_bit_flip_detected_in_every_chunk_of_a_large_tensor():
    row = digests._CHUNK * 2  # float32 elements per row of 64-bit words
    tensor = torch.randn(row * 40 + 5)  # past the one-dot head: 40 rows and a tail
    assert tensor.numel() // 2 > digests._HEAD
    reference = _hex(tensor)
    for index in (0, row - 1, row, row * 7 + 17, row * 39 + 1, tensor.numel() - 1):
        flipped = tensor.clone()
        flipped.view(torch.int32)[index] ^= 1
        assert _hex(flipped) != reference


def test_permutations_are_detected():
    gen = torch.Generator().manual_seed(1)
    tensor = torch.randn(64, 64, generator=gen)
    reference = _hex(tensor)
    swapped = tensor.clone().reshape(-1)
    swapped[[3, 2000]] = swapped[[2000, 3]]
    assert _hex(swapped.reshape(64, 64)) != reference
    assert _hex(tensor.reshape(-1)[torch.randperm(64 * 64, generator=gen)].reshape(64, 64)) \
        != reference
    assert _hex(tensor.t().contiguous()) != reference  # same shape, elements moved
    assert _hex(tensor.flip(0)) != reference


def test_digest_depends_on_bits_dtype_shape_not_on_layout():
    tensor = torch.arange(12.).reshape(3, 4)
    assert _hex(tensor.t()) == _hex(tensor.t().contiguous())  # logical order
    assert _hex(tensor[:, 1:3]) == _hex(tensor[:, 1:3].clone())  # strided view
    assert _hex(tensor) != _hex(tensor.reshape(4, 3))
    assert _hex(tensor) != _hex(tensor.double())
    assert _hex(torch.zeros(4)) != _hex(torch.zeros(4, dtype=torch.int32))
    assert _hex(torch.tensor([0.0])) != _hex(torch.tensor([-0.0]))  # bits, not values
    assert _hex(torch.zeros(0)) != _hex(torch.zeros(0, 3))
    assert _hex(tensor) == _hex(tensor.clone())
    assert _hex(tensor, 'a') != _hex(tensor, 'b')


def test_digest_does_not_depend_on_thread_count():
    tensor = torch.randn(65536 * 5)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = _hex(tensor)
        torch.set_num_threads(max(threads, 2))
        assert _hex(tensor) == one
    finally:
        torch.set_num_threads(threads)


def test_batched_digests_equal_one_by_one():
    """Every path of the batched digest (small, whole rows, others) gives the same bits."""
    gen = torch.Generator().manual_seed(3)
    big = torch.randn(digests._CHUNK * 2 * 20, generator=gen)  # whole 256-word rows
    tensors = [
        torch.randn(64, generator=gen),  # small, whole words
        torch.randn(27, generator=gen),  # small, a half word at the end
        torch.tensor(5),  # 0-d int64
        big.reshape(40, -1),  # rows
        torch.randn(digests._CHUNK * 2 * 9 + 6, generator=gen),  # big with a partial row
        big.reshape(40, -1).t(),  # not contiguous
        torch.randn(4096, generator=gen).half(),  # small at the size limit
        torch.randn(digests._HEAD * 2 + 2, generator=gen),  # just past the head
        torch.zeros(0),
        torch.rand(300, generator=gen) > 0.5,  # bool
        big[2:digests._CHUNK * 2 + 2],  # offset by 8 bytes: aligned, in place
        big[1:digests._CHUNK * 2 + 1],  # offset by 4 bytes: copied
    ]
    expected = [int(digests._bits_digest(t)) for t in tensors]
    assert digests._bits_digests(tensors).tolist() == expected
    assert digests._bits_digests(tensors[::-1]).tolist() == expected[::-1]
    assert digests._bits_digests([tensors[3]] * 3).tolist() == [expected[3]] * 3
    assert digests._bits_digests([]).tolist() == []


def _fixed_tensors():
    a = (torch.arange(6000, dtype=torch.float64).reshape(60, 100) * 0.37).float()
    return dict(f32=a, f16=a[:7, :9].half(), i64=torch.arange(-50, 50, dtype=torch.int64),
                strided=a.t()[::3], bool=a[:3, :5] > 3.0, empty=torch.zeros(0, 3))


def test_digests_of_fixed_tensors_are_pinned():
    """The values trace format 2 has always given (computed before trace/ was split)."""
    pinned = dict(f32='4ccc40d398fc3bae', f16='21d6b3e9ce5ce33f', i64='ee914f30ec219dbe',
                  strided='b14c0b637c069344', bool='ad40cda49bff957b', empty='9718f27529b79bf2')
    tensors = _fixed_tensors()
    assert {k: T.to_hex(T.tensor_digest(t, 'x')) for k, t in tensors.items()} == pinned
    nested = (tensors['f32'], [tensors['i64'], {'y': tensors['f16'], 'n': 3, 'f': 0.5}])
    assert T.to_hex(batching.digest(nested)) == 'a01b0b130dd7d728'
