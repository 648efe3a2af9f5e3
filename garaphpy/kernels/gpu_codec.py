"""The GPU's decoder of compressed pages: gap-bp128 images expanded on the device.

A store built with ``compress`` holds pages as bit-packed gaps per block of
128 edges (:mod:`garaphpy.storage.page_codec`, about 2.2 bytes an edge
against the plain page's 6).  A GPU run that streams pages copies the
compressed image to the device and expands it there, on the copy's stream,
into the plain layout the pull kernels read (Garaph section 2.1's source ids
and IdxOff), so the bus carries the compressed bytes (the idea of GCGT,
SIGMOD'19: traverse compressed adjacency on the GPU).  The kernel
(``gp_decode_gap_bp128``, kernels/cuda/codec.cu) gives one warp to one block
of edges; it reads the destinations from the CSC index ``in_offsets``, held
on the device for the run (32-bit offsets when the graph has fewer than 2^32
edges, 4 bytes a vertex).  The edge values are stored as they are and are
copied, not decoded.

The kernel is independent of the program: it is compiled once per process and
vertex type, apart from the program's module.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..storage import page_codec
from .gpu import cupy_module

__all__ = ["CompressedLayout", "compressed_layout", "decode_buffer_offsets", "offsets_dtype", "device_offsets", "decode_kernel", "launch_decode",
           "DECODE_THREADS_PER_BLOCK"]

_SOURCE_PATH = Path(__file__).with_name("cuda") / "codec.cu"

#: Threads of one block of the decoder (eight warps, eight blocks of edges).
DECODE_THREADS_PER_BLOCK = 256

_KERNELS: dict = {}
_KERNELS_LOCK = threading.Lock()

_CTYPES = {np.dtype(np.int32): "int", np.dtype(np.int64): "long long",
           np.dtype(np.uint32): "unsigned int"}


@dataclass(frozen=True)
class CompressedLayout:
    """What of a compressed page crosses the bus, in bytes from its start.

    Attributes
    ----------
    nbytes : int
        The bytes copied: the edge stream, and the edge values where the
        kernels read them.
    weights_offset : int
        Where the edge values start in the image (the plain page's values).
    weight_bytes : int
        Bytes of the edge values on the wire (0: not read).
    """

    nbytes: int
    weights_offset: int
    weight_bytes: int


def compressed_layout(info, weight_itemsize: int, reads_weights: bool) -> CompressedLayout:
    """The layout on the wire of compressed page ``info``
    (:class:`~garaphpy.storage.store.PageInfo`)."""
    weight_bytes = info.num_edges * weight_itemsize if reads_weights else 0
    nbytes = info.stored_weights_offset + weight_bytes
    return CompressedLayout(int(nbytes), int(info.stored_weights_offset), int(weight_bytes))


#: Alignment of each array in a buffer of decoded edges (the pull's vector loads).
_ARRAY_ALIGNMENT = 256


def decode_buffer_offsets(edges: int, vertex_itemsize: int, weight_itemsize: int) -> dict:
    """Where a buffer of ``edges`` decoded edges holds its sources, IdxOff and
    values (``weight_itemsize`` 0: none), in bytes, and its size ``nbytes``."""
    def align(value: int) -> int:
        return -(-value // _ARRAY_ALIGNMENT) * _ARRAY_ALIGNMENT

    idxoff = align(edges * vertex_itemsize)
    weights = align(idxoff + 2 * edges)
    return {"sources": 0, "idxoff": idxoff, "weights": weights,
            "nbytes": weights + edges * weight_itemsize}


def offsets_dtype(num_edges: int) -> np.dtype:
    """The type of the CSC index on the device: 32-bit when every offset fits."""
    return np.dtype(np.uint32) if int(num_edges) < 2 ** 32 else np.dtype(np.int64)


def device_offsets(cupy, in_offsets: np.ndarray):
    """The CSC index ``in_offsets`` on the device, as :func:`offsets_dtype` says."""
    dtype = offsets_dtype(int(in_offsets[-1]) if in_offsets.size else 0)
    return cupy.asarray(np.ascontiguousarray(in_offsets, dtype=dtype))


def decode_kernel(vertex_dtype, offset_dtype):
    """The decoder for sources of ``vertex_dtype`` and an index of
    ``offset_dtype`` (compiled once per process)."""
    key = (np.dtype(vertex_dtype), np.dtype(offset_dtype))
    with _KERNELS_LOCK:
        kernel = _KERNELS.get(key)
        if kernel is None:
            cupy = cupy_module()
            name = f"gp_decode_gap_bp128<{_CTYPES[key[0]]}, {_CTYPES[key[1]]}>"
            source = (f"#define GP_BLOCK_EDGES {page_codec.BLOCK_EDGES}\n"
                      + _SOURCE_PATH.read_text())
            module = cupy.RawModule(code=source, options=("-std=c++17",),
                                    name_expressions=(name,))
            module.compile()
            kernel = _KERNELS[key] = module.get_function(name)
        return kernel


def launch_decode(kernel, image, stream_words: int, in_offsets, info, shard_first_vertex,
                  shard_edge_begin, sources, idxoff, errors, stream=None, *,
                  blocks: tuple[int, int] | None = None) -> None:
    """Queue the decode of compressed page ``info`` from the device ``image``
    (uint8, its edge stream first) into ``sources`` and ``idxoff`` (None: not
    wanted), on ``stream`` (default: the current one).

    Parameters
    ----------
    kernel : cupy.RawKernel
        :func:`decode_kernel`'s for the store's vertex type and the index's.
    stream_words : int
        Words of the edge stream (:func:`garaphpy.storage.page_codec.stream_words`).
    in_offsets : cupy.ndarray
        The whole graph's CSC index on the device (:func:`device_offsets`).
    info : garaphpy.storage.store.PageInfo
    shard_first_vertex, shard_edge_begin : cupy.ndarray of int64
        Every shard's first vertex and first edge, the latter relative to its
        page's first edge.
    sources, idxoff : cupy.ndarray or int
        Where the decoded edges go (an array, or a device address), from the
        first edge of the first block decoded on.
    errors : cupy.ndarray of uint32
        ``errors[0]`` counts the blocks whose words contradict the stream.
    blocks : (int, int), optional
        The blocks of :data:`~garaphpy.storage.page_codec.BLOCK_EDGES` edges
        decoded, ``first .. end - 1`` (default: all of the page's).
    """
    num_blocks = -(-info.num_edges // page_codec.BLOCK_EDGES)
    first_block, end_block = (0, num_blocks) if blocks is None else blocks
    end_block = min(end_block, num_blocks)
    if end_block <= first_block:
        return
    warps = DECODE_THREADS_PER_BLOCK // 32
    arguments = (image, np.int64(stream_words), in_offsets, np.int64(info.edge_begin),
                 np.int64(info.num_edges), np.int64(info.first_vertex),
                 np.int64(info.end_vertex), shard_first_vertex, shard_edge_begin,
                 np.int32(info.first_shard), np.int32(info.num_shards),
                 np.int64(first_block), np.int64(end_block), _address(sources),
                 np.uint64(0) if idxoff is None else _address(idxoff), errors)
    launch = ((-(-(end_block - first_block) // warps),), (DECODE_THREADS_PER_BLOCK,),
              arguments)
    if stream is None:
        kernel(*launch)
    else:
        with stream:
            kernel(*launch)


def _address(array):
    """A kernel's pointer argument: a device array as it is, an address as a uint64."""
    return np.uint64(array) if isinstance(array, (int, np.integer)) else array
