"""A partition's changes for one reader go in the fewest bytes of three forms
(every vertex's values alone, a bitmap over the mirror list, or indices),
values that are all the same bits as one value; the reader gets back the
same (index, value) pairs, checked against plain NumPy."""

from __future__ import annotations

import numpy as np
import pytest

from garaphpy.distributed.exchange import decode_changes, encode_changes, message_bytes


def pairs(message, mirror_list):
    indices, values = decode_changes(message, mirror_list)
    return indices, np.broadcast_to(values, indices.shape)


def mirror(rng, size=4000):
    return np.sort(rng.choice(100_000, size, replace=False)).astype(np.int64)


@pytest.mark.parametrize("changed, form", [(4000, "all"), (1500, "bitmap"), (40, "indices")])
@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.int32])
def test_each_form_gives_back_the_pairs(changed, form, dtype):
    rng = np.random.default_rng(changed)
    mirror_list = mirror(rng)
    vertices = np.sort(rng.choice(mirror_list, changed, replace=False))
    values = (rng.random(changed) * 1000).astype(dtype)
    message = encode_changes(vertices, values, mirror_list, np.int32)
    assert message[0] == form
    indices, got = pairs(message, mirror_list)
    np.testing.assert_array_equal(indices, vertices)
    np.testing.assert_array_equal(got, values)
    plain = changed * (4 + values.itemsize)
    assert message_bytes(message) <= plain


def test_one_level_goes_as_one_value_and_a_bitmap():
    """A BFS iteration's changes: one level, a dense frontier: 1/8 byte a
    vertex of the mirror list and one value, against 12 bytes a change."""
    rng = np.random.default_rng(2)
    mirror_list = mirror(rng, 80_000)
    vertices = np.sort(rng.choice(mirror_list, 20_000, replace=False))
    levels = np.full(vertices.size, 3, np.int64)
    message = encode_changes(vertices, levels, mirror_list, np.int32)
    assert message[0] == "bitmap" and message[2].size == 1
    assert message_bytes(message) == 80_000 // 8 + 8
    indices, got = pairs(message, mirror_list)
    np.testing.assert_array_equal(indices, vertices)
    np.testing.assert_array_equal(got, levels)


def test_values_equal_but_not_the_same_bits_are_kept_apart():
    mirror_list = np.arange(10, dtype=np.int64)
    vertices = np.array([1, 4, 7])
    for values in (np.array([0.0, -0.0, 0.0]), np.array([np.nan, np.nan, 1.0])):
        message = encode_changes(vertices, values, mirror_list, np.int32)
        assert message[2].size == 3
        _, got = pairs(message, mirror_list)
        np.testing.assert_array_equal(got.view(np.uint64), values.view(np.uint64))
    same_nan = np.full(3, np.nan)
    assert encode_changes(vertices, same_nan, mirror_list, np.int32)[2].size == 1


def test_no_change_is_an_empty_message():
    mirror_list = np.arange(10, dtype=np.int64)
    message = encode_changes(np.zeros(0, np.int64), np.zeros(0), mirror_list, np.int32)
    indices, values = decode_changes(message, mirror_list)
    assert indices.size == 0 and values.size == 0


@pytest.mark.parametrize("dtype", [np.float64, np.int64])
@pytest.mark.parametrize("changed", [0, 3, 300, 2500, 6000, 10_000])
def test_mirrors_messages_give_back_each_readers_pairs(changed, dtype):
    """:meth:`Mirrors.messages`, made from the changed vertices alone, gives
    each reader the pairs :meth:`Mirrors.pairs_for` selects, in no more bytes
    than :func:`encode_changes` of them (one level goes as one value)."""
    from garaphpy.distributed.exchange import Mirrors

    rng = np.random.default_rng(changed)
    first, end = 5_000, 15_000
    mirrors = Mirrors(first, end)
    for reader, size in ((0, 4000), (2, 9000), (3, 0), (4, 10_000)):
        mirrors.set_reader(reader, np.sort(rng.choice(np.arange(first, end), size,
                                                      replace=False)))
    vertices = np.sort(rng.choice(np.arange(first, end), changed, replace=False))
    for values in ((rng.random(20_000) * 1000).astype(dtype), np.full(20_000, 7, dtype)):
        messages = mirrors.messages(vertices, values, np.int32)
        selected = mirrors.pairs_for(vertices)
        assert sorted(messages) == sorted(selected)
        for reader, chosen in selected.items():
            plain = encode_changes(chosen, values[chosen], mirrors.lists[reader], np.int32)
            assert messages[reader][0] == plain[0]
            assert message_bytes(messages[reader]) == message_bytes(plain)
            indices, got = pairs(messages[reader], mirrors.lists[reader])
            np.testing.assert_array_equal(indices, chosen)
            np.testing.assert_array_equal(got, values[chosen])


@pytest.mark.parametrize("size", [0, 1, 7, 8, 9, 63, 1000, 4099])
def test_bitmap_kernels_match_numpy(size):
    """The one-pass bitmap of a reader's changed vertices and its reading
    back are numpy's packbits and unpackbits, bit for bit, at every length
    (a last byte partly used)."""
    from garaphpy.kernels import cpu as kernels

    rng = np.random.default_rng(size)
    first = 100
    mirror_list = np.sort(rng.choice(np.arange(first, first + 2 * size + 1), size,
                                     replace=False)).astype(np.int64)
    positions = np.full(2 * size + 1, -1, np.int32)
    positions[mirror_list - first] = np.arange(size, dtype=np.int32)
    changed = np.sort(rng.choice(np.arange(first, first + 2 * size + 1), size,
                                 replace=False)).astype(np.int64)
    bits = np.zeros((size + 7) // 8, np.uint8)
    listed = np.empty(changed.size, np.int64)
    count = kernels.mirror_bitmap(changed, first, positions, bits, listed)
    read = positions[changed - first] >= 0
    flags = np.zeros(size, np.bool_)
    flags[positions[changed[read] - first]] = True
    np.testing.assert_array_equal(bits, np.packbits(flags))
    np.testing.assert_array_equal(listed[:count], changed[read])
    np.testing.assert_array_equal(kernels.bitmap_members(bits, mirror_list),
                                  mirror_list[np.flatnonzero(flags)])


def test_one_value_is_found_without_a_gather():
    """``same_bits`` over a frontier: one value, or bits that differ (0.0
    and -0.0 differ; one NaN's bits throughout is one value)."""
    from garaphpy.kernels import cpu as kernels

    values = np.full(100, 3.0)
    frontier = np.array([2, 50, 97])
    assert kernels.same_bits(values.view(np.uint64), frontier)
    values[50] = -0.0
    values[2] = values[97] = 0.0
    assert not kernels.same_bits(values.view(np.uint64), frontier)
    assert kernels.same_bits(values.view(np.uint64), frontier[:1])
    assert kernels.same_bits(values.view(np.uint64), frontier[:0])


@pytest.mark.parametrize("one", [False, True])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_pairs_received_are_written_and_settled_as_numpy_would(one, index_dtype):
    """The inbox writes a message's pairs (one value for all, or one each)
    into the values on the worker's threads, as ``target[indices] = values``;
    a program final once set marks their vertices settled and claimed."""
    from garaphpy.distributed.exchange import Inbox
    from garaphpy.kernels import cpu as kernels

    rng = np.random.default_rng(int(one))
    indices = rng.choice(50_000, 9_000, replace=False).astype(index_dtype)
    values = np.full(1, 5) if one else rng.integers(0, 100, indices.size)
    inbox = Inbox()
    inbox.put(0, 3, "values", indices, values)
    target = np.arange(50_000, dtype=np.int64)
    expected = target.copy()
    expected[indices] = values
    received = []
    assert inbox.apply("values", target, 4, received) == indices.size
    np.testing.assert_array_equal(target, expected)
    settled, claimed = np.zeros(50_000, np.bool_), np.zeros(50_000, np.uint8)
    kernels.settle_received(np.asarray(received[0], np.int64), settled, claimed,
                            kernels.SETTLED_CLAIM)
    assert np.flatnonzero(settled).tolist() == np.sort(indices).tolist()
    assert (claimed[indices] == kernels.SETTLED_CLAIM).all() and claimed.sum() == \
        kernels.SETTLED_CLAIM * indices.size
