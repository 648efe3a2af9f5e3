"""Opening and reading a preprocessed store.

The store (DESIGN.md "The store"; Garaph sections 2.1-2.2) is a directory:

``manifest.json``
    Format version, |V|, |E|, directedness, weights, id mapping, cleaning
    summary, options, the page table, and for every binary array its dtype,
    shape and CRC-32.  The manifest carries a CRC-32 of itself.
``shards.bin``
    The shard table (:data:`garaphpy.storage.layout.SHARD_DTYPE`).
``blocks.bin``
    The data block table (:data:`garaphpy.storage.layout.BLOCK_DTYPE`):
    page, index in page, storage directory, byte offset, size, CRC-32.
``blocks.dat``
    The data blocks placed in this directory; the other storage
    directories hold a ``blocks.dat`` of their own (section 2.2).
``vertices/``
    ``in_offsets`` (CSC index, int64), ``out_offsets`` and ``out_targets``
    (CSR without values, for notify), ``in_degree``, ``out_degree`` and, for
    renumbered inputs, ``original_ids``.

A page image is ``sources | idxoff | weights`` (each 64-byte aligned):
int32 (or int64) source ids, the 16-bit destination offset from the
shard's first vertex, and the edge values.  A store built with
``compress`` (format version 2, ``layout.page_codec``) stores each page
whose row names a ``codec`` compressed (:mod:`garaphpy.storage.page_codec`);
every read decodes it into the plain image, so the readers' callers see
plain pages only.  The checksums cover the bytes on disk.
"""

from __future__ import annotations

import contextlib
import functools

import json
import os
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import config
from ..errors import StoreCorruptError, StoreError
from ..progress import human_bytes, human_count
from .edges import location_error
from . import page_codec, verify_levels
from .._numba_setup import parallel_section
from .filesafety import write_file
from .layout import BLOCK_DTYPE, SHARD_DTYPE
from .vertex_buffers import VertexBuffers

MANIFEST = "manifest.json"
#: The arrays memory-mapped rather than read when a store is opened: the
#: out-edge CSR, which only notifying and pushing runs read (a pull-only run,
#: PageRank's, never touches it), so that opening costs nothing for it.
MAPPED_ARRAYS = frozenset({"vertices/out_offsets.bin", "vertices/out_targets.bin"})


def _manifest_checksum(manifest: dict) -> int:
    body = {k: v for k, v in manifest.items() if k != "manifest_crc32"}
    return zlib.crc32(json.dumps(body, sort_keys=True).encode())


def write_manifest(directory: Path, manifest: dict) -> None:
    """Write ``manifest.json`` with its checksum, fsynced."""
    manifest = dict(manifest)
    manifest["manifest_crc32"] = _manifest_checksum(manifest)
    path = Path(directory) / MANIFEST
    text = json.dumps(manifest, indent=1, sort_keys=True)
    write_file(path, text.encode(), sync=True)


def read_manifest(directory) -> dict:
    """Read and check a store's manifest.

    Raises
    ------
    StoreError
        No store at ``directory``.
    StoreCorruptError
        The manifest is unreadable or its checksum does not match.
    """
    path = Path(directory) / MANIFEST
    if not path.is_file():
        raise StoreError(f"{directory}: no garaphpy store here (no {MANIFEST})")
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise StoreCorruptError(f"{path}: unreadable manifest ({error})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != "garaphpy-store":
        raise StoreCorruptError(f"{path}: not a garaphpy store manifest")
    if manifest.get("manifest_crc32") != _manifest_checksum(manifest):
        raise StoreCorruptError(f"{path}: manifest checksum mismatch")
    if manifest.get("format_version") not in config.READABLE_STORE_FORMAT_VERSIONS:
        readable = " and ".join(map(str, config.READABLE_STORE_FORMAT_VERSIONS))
        raise StoreError(f"{path}: store format version {manifest.get('format_version')}, "
                         f"this garaphpy reads versions {readable}; rebuild it")
    return manifest


def _mapped(path: Path, dtype: np.dtype, shape) -> np.ndarray:
    """The array in the file at ``path``, mapped copy-on-write: its pages are
    read from the file (or the page cache) when first touched.  A plain
    writable ndarray, so compiled kernels see the type a read array has; the
    mapping holds the file, so a store replaced at its path later (builds
    rename a new directory into place) is not seen."""
    if not path.stat().st_size:
        return np.empty(shape, dtype)
    return np.memmap(path, dtype, mode="c", shape=tuple(shape)).view(np.ndarray)


@dataclass(frozen=True)
class PageInfo:
    """One row of the page table."""

    index: int
    first_shard: int
    num_shards: int
    first_vertex: int
    end_vertex: int
    edge_begin: int
    num_edges: int
    nbytes: int
    idxoff_offset: int
    weights_offset: int
    first_block: int
    num_blocks: int
    #: how the image is stored (:data:`garaphpy.storage.page_codec.CODECS`);
    #: ``nbytes`` and the offsets above are those of the decoded, plain image
    codec: str = "plain"
    #: bytes of the image as stored (its data blocks), 0 for a plain page (``nbytes``)
    stored_nbytes: int = 0
    #: where the edge values start in the stored image of a compressed page
    stored_weights_offset: int = 0

    @property
    def compressed(self) -> bool:
        """Whether the stored image must be decoded into the plain one."""
        return self.codec != "plain"

    @property
    def disk_bytes(self) -> int:
        """Bytes of the page's data blocks (what a read of it moves)."""
        return self.stored_nbytes if self.compressed else self.nbytes


@dataclass
class Page:
    """A page read into host memory.

    Attributes
    ----------
    info : PageInfo
    image : numpy.ndarray of uint8 or None
        The whole page image (what the GPU receives in one copy); None for
        a view of an in-memory CSC
        (:class:`~garaphpy.storage.page_source.InMemoryPages`).
    sources : numpy.ndarray
        Source vertex of every edge, in CSC order.
    idxoff : numpy.ndarray of uint16 or None
        Destination of every edge minus its shard's first vertex (None for
        a view of an in-memory CSC).
    weights : numpy.ndarray or None
        Edge values.
    stored : bool
        ``image`` holds a compressed page as stored, not decoded (a
        :class:`~garaphpy.storage.page_io.PageReader` with ``decode="stored"``):
        ``sources``, ``idxoff`` and ``weights`` are None.
    """

    info: PageInfo
    image: np.ndarray | None
    sources: np.ndarray | None
    idxoff: np.ndarray | None
    weights: np.ndarray | None
    stored: bool = False


def _plural(count: int, one: str, many: str | None = None) -> str:
    return f"{count:,} {one if count == 1 else (many or one + 's')}"


def format_summary(manifest: dict) -> str:
    """A few lines describing a store (printed by the CLI)."""
    summary = manifest["summary"]
    layout = manifest["layout"]
    direction = "directed" if manifest["directed"] else "undirected"
    weights = f"weights {np.dtype(manifest['weight_dtype']).name}" if manifest["weighted"] \
        else "unweighted"
    lines = [
        f"graph {manifest['input']['name']} ({manifest['input']['format']}): "
        f"{manifest['num_vertices']:,} vertices, {manifest['num_edges']:,} edges, "
        f"{direction}, {weights}",
        f"  read {summary['edges_read']:,} edges; self-loops {summary['self_loops_found']:,} "
        f"found, {summary['self_loops_removed']:,} removed; "
        f"{summary['reverse_edges_added']:,} reverse edges added; "
        f"{summary['duplicates_removed']:,} duplicates removed",
        f"  isolated vertices {summary['isolated_vertices']:,}; max in-degree "
        f"{summary['max_in_degree']:,}; max out-degree {summary['max_out_degree']:,}",
        f"  store: {_plural(layout['num_shards'], 'shard')} in "
        f"{_plural(layout['num_pages'], 'page')} of at most "
        f"{human_bytes(layout['page_bytes'])}, "
        f"{_plural(len(manifest['storage_dirs']), 'storage directory', 'storage directories')}",
    ]
    codec = layout.get("page_codec", page_codec.PLAIN)
    choice = layout.get("compress")
    if isinstance(choice, dict) and choice.get("reason"):
        lines.append(f"  page format {choice['reason']}")
    if codec != page_codec.PLAIN:
        rows = manifest["pages"]
        stored = sum(row.get("stored_nbytes") or row["nbytes"] for row in rows)
        plain = sum(row["nbytes"] for row in rows)
        packed = sum(1 for row in rows if "codec" in row)
        lines.append(f"  pages stored {codec}: {_plural(packed, 'page')} of {len(rows):,} "
                     f"compressed, {human_bytes(stored)} on disk for {human_bytes(plain)} "
                     f"plain ({stored / max(manifest['num_edges'], 1):.2f} bytes an edge)")
    return "\n".join(lines)



def neighbour_in_degree(in_degree) -> float:
    """The in-degree of an edge's destination, on average over the edges:
    sum of in-degrees squared / |E| (1 for a graph without edges)."""
    degrees = np.asarray(in_degree)
    edges = float(degrees.sum(dtype=np.float64))
    # einsum's own loop, not BLAS (whose threads spin after a call, beside a run's),
    # and no float copy of the degrees
    return float(np.einsum("i,i->", degrees, degrees, dtype=np.float64)) / edges if edges \
        else 1.0

class Store:
    """A preprocessed graph store, opened for reading.

    Use :meth:`Store.open`.  Vertex arrays are loaded into memory, except
    the out-edge CSR (:data:`MAPPED_ARRAYS`), which is memory-mapped and
    read only where a run touches it; pages are read on demand with
    :meth:`read_page`.

    Attributes
    ----------
    path : pathlib.Path
    manifest : dict
    num_vertices, num_edges : int
    directed, weighted : bool
    vertex_dtype : numpy.dtype
        int32 while |V| < 2^31, else int64.
    weight_dtype : numpy.dtype or None
    shards : numpy.ndarray of SHARD_DTYPE
    blocks : numpy.ndarray of BLOCK_DTYPE
    pages : list of PageInfo
    in_offsets, out_offsets : numpy.ndarray of int64
    out_targets : numpy.ndarray
    in_degree, out_degree : numpy.ndarray
    """

    def __init__(self, path: Path, manifest: dict):
        #: descriptors of the block files, opened with the store
        self._block_fds: list[int] = []
        self.path = path
        self.manifest = manifest
        self.num_vertices = int(manifest["num_vertices"])
        self.num_edges = int(manifest["num_edges"])
        self.directed = bool(manifest["directed"])
        self.weighted = bool(manifest["weighted"])
        self.vertex_dtype = np.dtype(manifest["vertex_dtype"])
        self.weight_dtype = np.dtype(manifest["weight_dtype"]) if self.weighted else None
        self.pages = [PageInfo(index=i, **row) for i, row in enumerate(manifest["pages"])]
        codec = manifest["layout"].get("page_codec", page_codec.PLAIN)
        unknown = sorted(({codec} | {info.codec for info in self.pages})
                         - set(page_codec.CODECS))
        if unknown:
            raise StoreError(f"{path}: pages stored as {', '.join(unknown)}, a format this "
                             f"garaphpy does not read (it reads {', '.join(page_codec.CODECS)});"
                             " upgrade garaphpy or rebuild the store")
        #: how the store's pages are written (``plain`` for stores built before
        #: compressed pages existed)
        self.page_codec = codec
        self.storage_dirs = [path if d is None else Path(d) for d in manifest["storage_dirs"]]
        self._block_dirs = [path] + [
            Path(d) / f"{path.name}-{manifest['key'][:12]}" for d in manifest["storage_dirs"][1:]]
        self._arrays: dict[str, np.ndarray] = {}
        #: True when build_store found this store up to date instead of building it.
        self.reused = False
        #: the whole CSC held in host memory (:meth:`keep_csc`); None: read per call
        self._kept_csc = None
        #: its edge values in the out-edge CSR's order, placed by a run in memory for
        #: the next (:meth:`~garaphpy.storage.page_source.InMemoryPages.out_edge_values`)
        self.kept_out_edge_values = None
        #: a resident GPU run's whole-graph edge arrays, kept on the device for the
        #: next run over this store (:mod:`garaphpy.scheduler.gpu.page_store`)
        self.kept_device_edges = None
        #: per-vertex buffers the store's runs give back for its later runs, at most
        #: ``config.HOST_BYTES_PER_VERTEX`` a vertex (:meth:`release_vertex_arrays`
        #: drops them)
        self.vertex_buffers = VertexBuffers(config.HOST_BYTES_PER_VERTEX * self.num_vertices)

    # -- opening ----------------------------------------------------------
    @classmethod
    def open(cls, path, verify: str = "auto", key: str | None = None) -> "Store":
        """Open the store at ``path``.

        Parameters
        ----------
        path : str or os.PathLike
        verify : {"auto", "full", "quick", "sizes", "none"}
            ``full`` checks the CRC-32 of every array and data block (one
            read of the store); ``quick`` checks the manifest, the array
            checksums and the block files' sizes, leaving data blocks to be
            checked as pages are read; ``sizes`` the files' sizes only;
            ``none`` the manifest only.  ``auto``: ``sizes`` where a full
            check of these very files passed recently, ``full`` otherwise
            (:mod:`garaphpy.storage.verify_levels`).
        key : str, optional
            The key the store must have been built under
            (:func:`garaphpy.storage.builder.store_key`): a store of another
            input or other options is a StoreError.

        The block files are held open from here on: a store that another
        process replaces at ``path`` later is not read.

        Raises
        ------
        StoreError, StoreCorruptError
        """
        verify_levels.check_level(verify)
        path = Path(path)
        try:
            manifest = read_manifest(path)
            if key is not None and manifest.get("key") != key:
                raise StoreError(f"{path}: holds the store of another input or other options "
                                 "(its key changed while this process built or opened it)")
            store = cls(path, manifest)
            level = verify_levels.resolve(verify, store)
            store._load_arrays(check_sums=level in ("full", "quick"))
            store._check_block_files(check_sizes=level != "none")
            if level == "full":
                store.verify_blocks()
                verify_levels.record_full_check(store)
        except StoreCorruptError as error:
            raise StoreCorruptError(f"{error}; the store is damaged: rebuild it (--rebuild, "
                                    "store.rebuild = true, or rebuild=True)") from None
        return store

    def _array_path(self, name: str) -> Path:
        return self.path / name

    def _load_arrays(self, check_sums: bool = True) -> None:
        dtypes = {"shards.bin": SHARD_DTYPE, "blocks.bin": BLOCK_DTYPE}
        for name, meta in self.manifest["arrays"].items():
            path = self._array_path(name)
            dtype = dtypes.get(name, None) or np.dtype(meta["dtype"])
            if not path.is_file():
                raise StoreCorruptError(f"{path}: missing from the store")
            if path.stat().st_size != meta["nbytes"]:
                raise StoreCorruptError(f"{path}: {path.stat().st_size} bytes, the manifest "
                                        f"records {meta['nbytes']}")
            array = _mapped(path, dtype, meta["shape"]) if name in MAPPED_ARRAYS \
                else np.fromfile(path, dtype).reshape(meta["shape"])
            if check_sums and zlib.crc32(memoryview(np.ascontiguousarray(array)).cast("B")) \
                    != meta["crc32"]:
                raise StoreCorruptError(f"{path}: checksum mismatch")
            self._arrays[name] = array
        self.shards = self._arrays["shards.bin"]
        self.blocks = self._arrays["blocks.bin"]
        self.in_offsets = self._arrays["vertices/in_offsets.bin"]
        self.out_offsets = self._arrays["vertices/out_offsets.bin"]
        self.out_targets = self._arrays["vertices/out_targets.bin"]
        self.in_degree = self._arrays["vertices/in_degree.bin"]
        self.out_degree = self._arrays["vertices/out_degree.bin"]

    def _block_file(self, directory: int) -> Path:
        return self._block_dirs[directory] / self.manifest["layout"]["block_file"]

    @property
    def block_files(self) -> list[Path]:
        """The block file of each storage directory, in directory order."""
        return [self._block_file(d) for d in range(len(self._block_dirs))]

    def _check_block_files(self, check_sizes: bool = True) -> None:
        for directory in range(len(self._block_dirs)):
            path = self._block_file(directory)
            if not path.is_file():
                raise StoreCorruptError(f"{path}: block file of storage directory "
                                 f"{self.storage_dirs[directory]} is missing")
            self._block_fds.append(os.open(path, os.O_RDONLY))
            if not check_sizes:
                continue
            mine = self.blocks[self.blocks["directory"] == directory]
            needed = int((mine["offset"] + mine["nbytes"]).max()) if mine.size else 0
            size = os.fstat(self._block_fds[-1]).st_size
            if size < needed:
                raise StoreCorruptError(f"{path}: truncated ({size} bytes, "
                                        f"blocks need {needed})")

    def _read_block(self, block, target) -> int:
        """Read one data block into ``target``; the bytes read."""
        return os.preadv(self._block_fds[int(block["directory"])], [memoryview(target)],
                         int(block["offset"]))

    def close(self) -> None:
        """Close the block files (also done when the store is dropped)."""
        fds, self._block_fds = self._block_fds, []
        for fd in fds:
            os.close(fd)

    def __del__(self):
        try:
            self.close()
        except OSError:     # already closed elsewhere (a forked child): nothing to release
            pass

    def verify_blocks(self) -> None:
        """Check the CRC-32 of every data block; raise StoreCorruptError."""
        for block in self.blocks:
            data = bytearray(int(block["nbytes"]))
            self._read_block(block, data)
            if zlib.crc32(data) != int(block["crc32"]):
                raise StoreCorruptError(
                    f"{self._block_file(int(block['directory']))}: checksum mismatch in block "
                    f"{int(block['index'])} of page {int(block['page'])}")

    # -- reading ------------------------------------------------------------
    def read_page(self, index: int, out: np.ndarray | None = None,
                  check: bool = True) -> Page:
        """Read page ``index`` into host memory (a compressed page decoded).

        Parameters
        ----------
        index : int
        out : numpy.ndarray of uint8, optional
            A buffer of at least ``pages[index].nbytes`` bytes (for example
            pinned memory) to read into.
        check : bool
            Verify each block's CRC-32 as it is read.
        """
        info = self.pages[index]
        image = np.empty(info.nbytes, np.uint8) if out is None else out[:info.nbytes]
        if not info.compressed:
            self._read_stored(info, image, check)
            return self.page_views(info, image)
        stored = np.empty(info.stored_nbytes, np.uint8)
        self._read_stored(info, stored, check)
        with parallel_section():
            self.decode_page(info, stored, image, parallel=True)
        return self.page_views(info, image)

    def read_edges(self, index: int, edge_begin: int, edge_end: int, sources: np.ndarray,
                   weights: np.ndarray | None = None) -> None:
        """The sources of edges ``edge_begin..edge_end-1`` (global edge numbers,
        inside page ``index``) into ``sources``, and their values into
        ``weights`` where given (each C-contiguous, one entry an edge).  Of a
        plain page only the data blocks holding them are read (each block's
        CRC-32 checked), neither its IdxOff nor its other edges: a partition
        of a page's vertices reads its share; a compressed page is read and
        decoded whole."""
        info = self.pages[index]
        first, last = edge_begin - info.edge_begin, edge_end - info.edge_begin
        if not 0 <= first <= last <= info.num_edges:
            raise ValueError(f"edges {edge_begin}..{edge_end - 1} are not in page {index}")
        if info.compressed:
            page = self.read_page(index)
            sources[:] = page.sources[first:last]
            if weights is not None:
                weights[:] = page.weights[first:last]
            return
        regions = [(first * self.vertex_dtype.itemsize, sources)]
        if weights is not None:
            regions.append((info.weights_offset + first * self.weight_dtype.itemsize, weights))
        self._read_page_regions(info, regions)

    def read_stored(self, index: int, out: np.ndarray | None = None,
                    check: bool = True) -> np.ndarray:
        """The bytes of page ``index`` as stored, not decoded: a compressed
        page's image for a decoder elsewhere (the GPU's,
        :mod:`garaphpy.kernels.gpu_codec`), its blocks' CRC-32 checked.

        Parameters
        ----------
        index : int
        out : numpy.ndarray of uint8, optional
            A buffer of at least ``pages[index].disk_bytes`` bytes to read into.
        check : bool
            Verify each block's CRC-32 as it is read.
        """
        info = self.pages[index]
        image = np.empty(info.disk_bytes, np.uint8) if out is None else out[:info.disk_bytes]
        self._read_stored(info, image, check)
        return image

    def _read_stored(self, info: PageInfo, image: np.ndarray, check: bool) -> None:
        """Read the data blocks of page ``info`` into ``image`` (its stored bytes)."""
        block_bytes = self.manifest["layout"]["block_bytes"]
        for block in self.blocks[info.first_block:info.first_block + info.num_blocks]:
            start = int(block["index"]) * block_bytes
            nbytes = int(block["nbytes"])
            target = image[start:start + nbytes]
            if self._read_block(block, target) != nbytes:
                raise StoreCorruptError(f"{self._block_file(int(block['directory']))}: "
                                        f"short read of page {info.index}")
            if check and zlib.crc32(target) != int(block["crc32"]):
                raise StoreCorruptError(f"{self._block_file(int(block['directory']))}: checksum "
                                        f"mismatch in block {int(block['index'])} of page "
                                        f"{info.index}")

    def decode_page(self, info: PageInfo, stored: np.ndarray, image: np.ndarray | None,
                    parallel: bool = False, sources: np.ndarray | None = None,
                    weights: np.ndarray | None = None) -> None:
        """Decode the stored bytes of compressed page ``info`` into the plain
        page ``image`` (sources, IdxOff and weights at their offsets), or, with
        ``image`` None, its sources and weights into ``sources`` and
        ``weights`` (:mod:`garaphpy.storage.page_codec`).

        Raises
        ------
        StoreCorruptError
            The stored bytes do not decode into a page of ``info``'s edges.
        """
        n = info.num_edges
        idxoff = shard_first = None
        if image is not None:
            image = image[:info.nbytes]
            sources = image[:n * self.vertex_dtype.itemsize].view(self.vertex_dtype)
            idxoff = image[info.idxoff_offset:info.idxoff_offset + 2 * n].view(np.uint16)
            shard_first = self.page_shards(info.index)["first_vertex"]
        try:
            page_codec.decode_sources(stored, self.in_offsets, info.edge_begin,
                                      info.first_vertex, info.end_vertex, sources,
                                      idxoff=idxoff, shard_first=shard_first,
                                      parallel=parallel)
        except StoreCorruptError as error:
            raise StoreCorruptError(f"{self.path}: page {info.index}: {error}") from None
        if image is not None:
            if self.weighted:
                size = self.weight_dtype.itemsize
                weights = image[info.weights_offset:info.weights_offset + size * n].view(
                    self.weight_dtype)
        if self.weighted and weights is not None and n:
            size = self.weight_dtype.itemsize
            start = info.stored_weights_offset
            if start + size * n > stored.nbytes:
                raise StoreCorruptError(f"{self.path}: page {info.index}: its stored image "
                                        "ends before its edge values")
            weights[:] = stored[start:start + size * n].view(self.weight_dtype)

    def page_views(self, info: PageInfo, image: np.ndarray) -> Page:
        """Typed views of the arrays inside a page image."""
        n = info.num_edges
        sources = image[:n * self.vertex_dtype.itemsize].view(self.vertex_dtype)
        idxoff = image[info.idxoff_offset:info.idxoff_offset + 2 * n].view(np.uint16)
        weights = None
        if self.weighted:
            size = self.weight_dtype.itemsize
            weights = image[info.weights_offset:info.weights_offset + size * n].view(
                self.weight_dtype)
        return Page(info, image, sources, idxoff, weights)

    def page_shards(self, index: int) -> np.ndarray:
        """The rows of the shard table belonging to page ``index``."""
        info = self.pages[index]
        return self.shards[info.first_shard:info.first_shard + info.num_shards]

    def csc(self):
        """The whole CSC in memory: (in_offsets, sources, weights or None): the one
        :meth:`keep_csc` holds, or read from the pages (their blocks' CRC-32
        checked).

        Each page's sources and weights are read straight into the CSC's
        arrays; blocks holding only IdxOff (which the CSC does not need) are
        not read; a compressed page's sources are decoded into them.  Pages
        are read by up to one thread per core (reads, CRC-32 and decoding
        release the GIL), each into its own part of the arrays, or, with
        fewer compressed pages than cores, one after the other, each decoded
        by all cores; the first page that fails raises.
        """
        kept = self._kept_csc
        if kept is not None:
            return kept
        sources = np.empty(self.num_edges, self.vertex_dtype)
        weights = np.empty(self.num_edges, self.weight_dtype) if self.weighted else None

        cores = len(os.sched_getaffinity(0))
        threads = min(len(self.pages), cores)
        # a compressed page is decoded by all cores when there are fewer pages than cores
        whole_pages = any(info.compressed for info in self.pages) and len(self.pages) < cores

        def read(info: PageInfo) -> None:
            edges = slice(info.edge_begin, info.edge_begin + info.num_edges)
            if info.compressed:
                stored = np.empty(info.stored_nbytes, np.uint8)
                self._read_stored(info, stored, check=True)
                with parallel_section() if whole_pages else contextlib.nullcontext():
                    self.decode_page(info, stored, None, parallel=whole_pages,
                                     sources=sources[edges],
                                     weights=None if weights is None else weights[edges])
                return
            regions = [(0, sources[edges])]
            if weights is not None:
                regions.append((info.weights_offset, weights[edges]))
            self._read_page_regions(info, regions)

        if threads <= 1 or whole_pages:
            for info in self.pages:
                read(info)
        else:
            with ThreadPoolExecutor(threads, thread_name_prefix="garaphpy-csc") as pool:
                for done in [pool.submit(read, info) for info in self.pages]:
                    done.result()
        return self.in_offsets, sources, weights

    def _read_page_regions(self, info: PageInfo, regions: list) -> None:
        """Read the parts of page ``info``'s image that ``regions`` (pairs of a
        byte offset in the image and the array receiving the bytes there, in
        increasing order) cover into those arrays, checking the CRC-32 of every
        block read; the bytes between the regions go to a scratch buffer."""
        block_bytes = self.manifest["layout"]["block_bytes"]
        spans = [(start, start + array.nbytes, memoryview(array).cast("B"))
                 for start, array in regions if array.nbytes]
        scratch = None
        for block in self.blocks[info.first_block:info.first_block + info.num_blocks]:
            begin = int(block["index"]) * block_bytes
            end = begin + int(block["nbytes"])
            if not any(lo < end and begin < hi for lo, hi, _ in spans):
                continue
            buffers, position, gap_bytes = [], begin, 0
            for lo, hi, view in spans:
                if hi <= position or lo >= end:
                    continue
                if lo > position:
                    if scratch is None:
                        scratch = memoryview(bytearray(block_bytes))
                    # each gap its own bytes: the checksum reads them all back
                    buffers.append(scratch[gap_bytes:gap_bytes + lo - position])
                    gap_bytes += lo - position
                buffers.append(view[max(lo, position) - lo:min(hi, end) - lo])
                position = min(hi, end)
            if position < end:
                if scratch is None:
                    scratch = memoryview(bytearray(block_bytes))
                buffers.append(scratch[gap_bytes:gap_bytes + end - position])
            path = self._block_file(int(block["directory"]))
            if os.preadv(self._block_fds[int(block["directory"])], buffers,
                         int(block["offset"])) != end - begin:
                raise StoreCorruptError(f"{path}: short read of page {info.index}")
            crc = 0
            for buffer in buffers:
                crc = zlib.crc32(buffer, crc)
            if crc != int(block["crc32"]):
                raise StoreCorruptError(f"{path}: checksum mismatch in block "
                                        f"{int(block['index'])} of page {info.index}")

    def keep_csc(self):
        """:meth:`csc`, held in host memory for later calls: a graph's later runs
        in memory read no page (GAPBS reads its graph once for many trials).
        Held until :meth:`release_csc` or the store is dropped."""
        if self._kept_csc is None:
            self._kept_csc = self.csc()
        return self._kept_csc

    def release_csc(self) -> bool:
        """Drop the CSC :meth:`keep_csc` holds and :attr:`kept_out_edge_values`;
        returns whether one was held."""
        held = self._kept_csc is not None or self.kept_out_edge_values is not None
        self._kept_csc = self.kept_out_edge_values = None
        return held

    def release_device_edges(self) -> bool:
        """Drop the device edge arrays a resident GPU run kept
        (:attr:`kept_device_edges`); returns whether some were held."""
        held = self.kept_device_edges is not None
        self.kept_device_edges = None
        return held

    # -- ids ---------------------------------------------------------------
    def original_ids(self, internal: np.ndarray | None = None) -> np.ndarray:
        """The user's id of internal vertices (all of them by default)."""
        mapping = self.manifest["id_mapping"]
        if internal is None:    # one pass over a new array, not an index and a lookup
            if mapping["kind"] == "table":
                return self._arrays[mapping["array"]][:self.num_vertices].copy()
            base = int(mapping["base"])
            return np.arange(base, base + self.num_vertices, dtype=np.int64)
        internal = np.asarray(internal, dtype=np.int64)
        if mapping["kind"] == "table":
            return self._arrays[mapping["array"]][internal]
        return internal + int(mapping["base"])

    @functools.cached_property
    def original_id_array(self) -> np.ndarray:
        """Every vertex's user id (int64, C-contiguous), made once per opened
        store and shared by its runs (the ``vertex`` attribute, the labels a
        shortcut compares with): the id table itself where there is one, else
        one array.  Read only, like :attr:`in_degree`; :meth:`original_ids`
        gives the user a new array."""
        mapping = self.manifest["id_mapping"]
        if mapping["kind"] == "table":
            return np.ascontiguousarray(self._arrays[mapping["array"]][:self.num_vertices],
                                        dtype=np.int64)
        if int(mapping["base"]) == 0:
            return self.vertex_range
        base = int(mapping["base"])
        return np.arange(base, base + self.num_vertices, dtype=np.int64)

    @functools.cached_property
    def vertex_range(self) -> np.ndarray:
        """0..|V|-1 (int64), made once per opened store and shared by its runs
        (the first frontier of a program active everywhere).  Read only, like
        every frontier."""
        return np.arange(self.num_vertices, dtype=np.int64)

    @functools.cached_property
    def in_edge_bits(self) -> np.ndarray:
        """Bit ``v % 64`` of word ``v // 64`` (uint64) set where vertex v has
        in-edges: what a whole-CSC pull with early exit passes over the others
        by (:func:`garaphpy.kernels.cpu.pull_settling_whole`).  Made once per
        opened store and shared by its runs; read only."""
        has_in_edges = self.in_offsets[1:] != self.in_offsets[:-1]
        packed = np.zeros((self.num_vertices + 63) // 64 * 8, np.uint8)
        bits = np.packbits(has_in_edges, bitorder="little")
        packed[:bits.size] = bits
        return packed.view("<u8").astype(np.uint64)

    def release_vertex_arrays(self) -> bool:
        """Drop :attr:`original_id_array`, :attr:`vertex_range` and
        :attr:`in_edge_bits` where made (they are made again when next asked
        for) and the runs' :attr:`vertex_buffers`; returns whether one was."""
        held = [self.__dict__.pop(name, None) for name in ("original_id_array",
                                                            "vertex_range", "in_edge_bits")]
        buffers = self.vertex_buffers.clear()
        return any(array is not None for array in held) or buffers

    def internal_ids(self, original) -> np.ndarray:
        """Internal ids of the user's vertex ids; KeyError for unknown ones."""
        original = np.atleast_1d(np.asarray(original, dtype=np.int64))
        mapping = self.manifest["id_mapping"]
        if mapping["kind"] == "table":
            table = self._arrays[mapping["array"]]
            position = np.searchsorted(table, original)
            ok = (position < table.size) & (table[np.minimum(position, table.size - 1)] == original)
        else:
            position = original - int(mapping["base"])
            ok = (position >= 0) & (position < self.num_vertices)
        if not ok.all():
            raise KeyError(f"vertex {int(original[~ok][0])} is not in the graph")
        return position

    # -- weights -----------------------------------------------------------
    def weight_domain_error(self, domain: str, program: str):
        """A GraphInputError when a stored edge value lies outside ``domain``, else None.

        Parameters
        ----------
        domain : {"any", "nonnegative", "positive"}
            :attr:`garaphpy.program.VertexProgram.weight_domain`.
        program : str
            The program's name, for the message.

        Stores record their smallest value and where the input's first
        negative or non-positive value is; for stores built before they did,
        the pages are read to find out (the message then gives no line).
        """
        if domain == "any" or not self.weighted:
            return None
        summary = self.manifest["summary"]
        low = summary.get("min_weight")
        if "min_weight" not in summary and self.num_edges:
            low = self.csc()[2].min().item()
        if low is None or low > 0 or (low == 0 and domain == "nonnegative"):
            return None
        what = "negative" if low < 0 else "zero"
        key = "first_negative_weight" if low < 0 else "first_nonpositive_weight"
        count = summary.get("negative_weights" if low < 0 else "nonpositive_weights")
        rule = ">= 0" if domain == "nonnegative" else "> 0"
        problem = (f"{program} is correct only for edge weights {rule} "
                   f"(weight_domain='{domain}')")
        found = summary.get(key)
        if found:
            many = f" (the first of {count:,})" if count and count > 1 else ""
            return location_error(found, f"{what} edge weight {found['value']!r}{many}: "
                                         f"{problem}")
        return StoreError(f"{self.path}: the graph has {what} edge weights (smallest {low!r}): "
                          f"{problem}")

    # -- description ---------------------------------------------------------
    @functools.cached_property
    def neighbour_in_degree(self) -> float:
        """The in-degree of an edge's destination, on average over the edges
        (sum of in-degrees squared / |E|; computed once per opened store):
        what a sparse pass can expect to pull per notified edge
        (:func:`garaphpy.scheduler.decisions.gpu_sparse_pass`)."""
        return neighbour_in_degree(np.diff(np.asarray(self.in_offsets)))

    @functools.cached_property
    def in_degree_skew(self) -> float:
        """:attr:`neighbour_in_degree` over the mean in-degree (1.0 for a regular
        graph or one without edges; computed once per opened store): the
        in-edges a notified vertex reads, relative to an average vertex's."""
        if self.num_edges == 0:
            return 1.0
        return self.neighbour_in_degree / (self.num_edges / self.num_vertices)

    @property
    def summary(self) -> dict:
        """The load summary recorded at build time."""
        return dict(self.manifest["summary"])

    def describe(self) -> str:
        """Human-readable summary of the graph and the layout."""
        return format_summary(self.manifest)

    def __repr__(self) -> str:
        return (f"Store({str(self.path)!r}, {human_count(self.num_vertices)} vertices, "
                f"{human_count(self.num_edges)} edges, {len(self.pages)} pages)")
