"""The GPU's part of a run's plan: its run-constant choices, made once (Garaph sections 3, 5.2).

:func:`plan_gpu` makes a :class:`GpuPlan` by the rules of
:mod:`~garaphpy.scheduler.decisions`, in the order they depend on each
other: the precompute of source gathers; the selective transfers; the pages'
plan (:class:`~garaphpy.scheduler.gpu.page_store.PagePlan`: resident or
streamed, section 5.2), packed or not, the selective arrays deferred or not;
the device loop's push, its order of value and its persistent kernel; the
device loop itself; per-page choices over resident pages; the copies queued
ahead; the union-find start of connected components (Afforest on the device);
the fused launch.  The engine's parts (:class:`~garaphpy.scheduler.gpu.engine.GpuEngine`,
:class:`~garaphpy.scheduler.gpu.page_store.PageStore`,
:class:`~garaphpy.scheduler.gpu.selective.SelectiveTransfers`) read the plan
and make no such choice themselves.

The plan is made at the engine's set-up, once the vertex data is on the
device: what it takes there (and the budget left beside it) is a fact the
pages' plan needs, and it depends on the precompute's choice, so
:func:`plan_gpu` asks for it (``vertex_memory``) once that choice is made.

Three choices depend on a fact known only later; for each the plan holds
the entry of either value of the fact, and the engine takes the one that
holds, in one place each:

* ``device_loop`` and ``fused_launch``, on whether checkpoints are taken
  after pages (the checkpointer sets that up after the engine):
  :meth:`GpuPlan.device_loop_entry`, :meth:`GpuPlan.fused_launch_entry`;
* ``selective_pushes``, on whether the out-edge CSR fits the host memory left
  once the page images are pinned: :meth:`GpuPlan.selective_pushes_entry`.

Tests and benches turn a choice off by naming it in ``turned_off``
(:data:`~garaphpy.scheduler.plan.GPU_CHOICES`): a choice with a switch among
its rule's inputs is made with the switch off (``enabled=False``,
``fuse_enabled=False``), another is recorded off with ``"turned_off"``.
"""

from __future__ import annotations

import dataclasses
import types
from dataclasses import dataclass, field
from typing import Callable, Mapping

import numpy as np

from ... import config
from .. import decisions, device_loop
from ..plan import GPU_CHOICES, check_turned_off, record_choice
from ..records import json_value
from ...kernels import gpu_codec
from ...program import activate_is_change, apply_reads_per_iteration
from ...storage import page_codec
from . import transfer
from .page_store import PAGE_SLACK_BYTES, RESIDENT_PADDING_EDGES, PagePlan, plan_pages
from .selective import selective_device_bytes
from .union_find_start import union_find_bytes

#: The GPU engine's keyword switches (for study), each the choice it turns off
#: when False.
ENGINE_SWITCHES = {"precompute": "gpu_precompute", "fuse_resident": "fused_launch",
                   "device_loop": "device_loop", "sparse_push": "gpu_push",
                   "value_priority": "gpu_value_priority", "packed_pages": "packed_pages",
                   "pull_packed": "pull_packed",
                   "defer_selective_arrays": "defer_selective_arrays",
                   "selective_when_pays": "selective_when_pays",
                   "calibrate_transfer_rates": "calibrate_transfer_rates"}

#: The choices whose entry depends on whether checkpoints are taken after pages.
BY_PAGE_CHECKPOINTS = ("device_loop", "fused_launch")


@dataclass(frozen=True)
class GpuPlan:
    """The GPU engine's choices for one run (:func:`plan_gpu` makes them).

    Attributes
    ----------
    synchronous : bool
    pages : PagePlan
        The pages' plan, as sized with every choice below.
    precompute : bool
        Pulls precompute the source-side gathers (``gpu_precompute``).
    selective_transfers : bool
        A run whose pages stream may choose per page (its rule's choice).
    selective_bytes : int
        Device bytes of the selective arrays when the run may use them, else 0.
    largest_wire_bytes : int
        The largest page's bytes on the wire (the compacted buffer's size).
    packed_layouts : Mapping
        Per page kept or streamed packed, its packed layout (empty: none).
    raw_buffers : bool
        A stream has a buffer for an unpacked page.
    decode_edges : int
        Edges of a stream's buffer for decoded compressed pages (0: none).
    selective_room : bool
        Pages stream and the selective arrays have room.
    transfer_forced : str
        ``config.GPU_TRANSFER`` as the plan read it: "auto", or one transfer
        for study.
    release_pages : numpy.ndarray of bool or None
        The kept pages released when the deferred selective arrays are made.
    pull_packed : bool
        Packed pages are pulled where they lie.
    push, value_priority, larger_first : bool
        The device loop pushes (``gpu_push``), in order of value
        (``gpu_value_priority``); the program's sum is ``max``.
    persistent_loop : bool
        The device loop may run several iterations a launch in its persistent
        kernel (``persistent_loop``).
    fused_push : bool
        Its persistent launches run each iteration as one fused pass
        (``fused_push``).
    device_loop : bool
        The device loop's choice without checkpoints after pages (its arrays
        are made at set-up if so).
    selective : bool
        Sparse iterations choose per page (streamed with room, or resident
        by ``resident_selective``).
    prefetch_next_copies : bool
    settled_pages : bool
        Selective iterations skip the streamed pages whose destinations are all
        settled (``settled_pages``: :func:`decisions.gpu_settled_pages`).
    selective_when_pays, calibrate_transfer_rates : bool
        How the selective transfers decide (switches for study).
    union_find_start : bool
        The first iteration starts from a union-find's labels on the device
        (``gpu_union_find_start``).
    turned_off : frozenset of str
    entries : Mapping
        Each choice's entry as recorded; the entries of
        :data:`BY_PAGE_CHECKPOINTS` by whether checkpoints are taken after
        pages, and ``selective_pushes`` by whether the pinned CSR fits.
    """

    synchronous: bool
    pages: PagePlan = field(compare=False)
    precompute: bool = False
    selective_transfers: bool = False
    selective_bytes: int = 0
    largest_wire_bytes: int = 0
    packed_layouts: Mapping = field(default_factory=lambda: types.MappingProxyType({}),
                                    compare=False, repr=False)
    raw_buffers: bool = True
    decode_edges: int = 0
    selective_room: bool = False
    transfer_forced: str = "auto"
    release_pages: np.ndarray | None = field(default=None, compare=False, repr=False)
    pull_packed: bool = True
    push: bool = False
    value_priority: bool = False
    larger_first: bool = False
    persistent_loop: bool = False
    fused_push: bool = False
    device_loop: bool = False
    selective: bool = False
    prefetch_next_copies: bool = False
    settled_pages: bool = False
    selective_when_pays: bool = True
    calibrate_transfer_rates: bool = True
    union_find_start: bool = False
    turned_off: frozenset = frozenset()
    entries: Mapping = field(default_factory=lambda: types.MappingProxyType({}),
                             compare=False, repr=False)

    @property
    def resident(self) -> bool:
        """Every page stays on the device."""
        return self.pages.resident

    def entry(self, name: str) -> dict | None:
        """The recorded entry of choice ``name``, or None where the run made
        no such choice (a resident run packs nothing, ...)."""
        return self.entries.get(name)

    def device_loop_entry(self, checkpoints_after_pages: bool) -> dict:
        """:func:`decisions.device_loop`'s entry for the run's checkpoints."""
        return self.entries["device_loop"][bool(checkpoints_after_pages)]

    def fused_launch_entry(self, checkpoints_after_pages: bool) -> dict:
        """:func:`decisions.fuse_gpu_launch`'s entry for the run's checkpoints."""
        return self.entries["fused_launch"][bool(checkpoints_after_pages)]

    def selective_pushes_entry(self, pinned_fits: bool) -> dict:
        """:func:`decisions.selective_pushes`'s entry, where the out-edge CSR
        fits pinned host memory (``pinned_fits``) or not; only where
        :attr:`selective`."""
        return self.entries["selective_pushes"][bool(pinned_fits)]

    def as_dict(self) -> dict:
        """Each choice's entry, by name, and the pages' plan, as JSON takes them."""
        by_fact = {**{name: "checkpoints_after_pages" for name in BY_PAGE_CHECKPOINTS},
                   "selective_pushes": "pinned_fits"}
        row = {"synchronous": self.synchronous,
               "pages": {"resident": self.pages.resident, "n_streams": self.pages.n_streams,
                         "budget": self.pages.budget, "vertex_bytes": self.pages.vertex_bytes,
                         "page_bytes": self.pages.page_bytes,
                         "streamed_pages": self.pages.streamed_pages}}
        for name, entry in self.entries.items():
            if name in by_fact:
                entry = {f"{by_fact[name]}={fact}": json_value(dict(variant))
                         for fact, variant in entry.items()}
                row[name] = entry
            else:
                row[name] = json_value(dict(entry))
        row["turned_off"] = sorted(self.turned_off)
        return row

    def describe(self) -> str:
        """One line: the pages and the choices taken."""
        taken = [name for name, on in (
            ("contributions precomputed", self.precompute),
            ("packed pages", bool(self.entry("packed_pages")
                                  and self.entry("packed_pages")["choice"])),
            ("compressed pages decoded on the device",
             bool(self.entry("compressed_pages") and self.entry("compressed_pages")["choice"])),
            ("selective transfers", self.selective),
            ("selective arrays deferred", self.release_pages is not None),
            ("push", self.push), ("value priority", self.value_priority),
            ("persistent loop", self.persistent_loop), ("fused push", self.fused_push),
            ("device loop", self.device_loop), ("union-find start", self.union_find_start),
            ("copies queued ahead", self.prefetch_next_copies)) if on]
        pages = "resident pages" if self.resident else \
            f"pages streamed over {self.pages.n_streams} streams"
        return f"{pages}; " + (", ".join(taken) if taken else "no optional path")


@dataclass(frozen=True)
class VertexMemory:
    """What the vertex data takes on the device, and the run's budget beside it."""

    vertex_bytes: int
    budget: int


def wire_bytes(store, reads_weights: bool) -> list[int]:
    """Per page, its bytes on the wire: sources and IdxOff, and its values
    where the kernels read them."""
    return [p.nbytes if reads_weights else p.weights_offset for p in store.pages]


def plan_gpu(program, translated, store, *, synchronous: bool, reads_weights: bool,
             n_streams: int, vertex_memory: Callable[[bool], VertexMemory],
             packed_layouts: Callable[[], dict],
             compressed_layouts: Callable[[], dict] = dict, host_copies: bool = False,
             reads_storage: bool = False, turned_off=frozenset()) -> GpuPlan:
    """The GPU engine's choices for a run of ``program`` over ``store``, each
    by its rule in :mod:`decisions`; a choice named in ``turned_off`` is off,
    and those made after it see it so.

    Parameters
    ----------
    program : VertexProgram
        Its declarations and gather's parameters.
    translated : object
        The program as translated for the GPU (its ``accum_dtype`` and
        ``aggregate_monoids``).
    store : garaphpy.storage.Store
    synchronous : bool
    reads_weights : bool
        The kernels read edge values.
    n_streams : int
    vertex_memory : callable
        ``vertex_memory(precompute)``: the device bytes of the vertex data made
        for that choice and the run's budget (:class:`VertexMemory`); the
        engine makes the data when called.
    packed_layouts : callable
        ``packed_layouts()``: per page that may be packed, its packed layout
        (called only where the pages do not all fit).
    compressed_layouts : callable
        ``compressed_layouts()``: per page stored compressed that may cross the
        bus so, its :class:`~garaphpy.kernels.gpu_codec.CompressedLayout`
        (called only where the pages do not all fit).
    host_copies : bool
        The engine copies updated vertex ranges back itself (never, today).
    reads_storage : bool
        The pages not kept in host memory are read from the storage directories.
    turned_off : iterable of str
        Names of :data:`~garaphpy.scheduler.plan.GPU_CHOICES`.
    """
    off = check_turned_off(turned_off) & frozenset(GPU_CHOICES)
    declared = type(program)
    gather_parameters = frozenset(declared.functions["gather"].parameters)
    entries: dict = {}

    def on(name: str) -> bool:
        return name not in off

    def choose(name: str, function, **inputs) -> bool:
        return record_choice(entries, off, name, function, **inputs)

    entries["gpu_precompute"] = decisions.fixed(
        decisions.precompute_source_gathers, direction="pull", synchronous=synchronous,
        gather_parameters=gather_parameters, enabled=on("gpu_precompute"))
    precompute = bool(entries["gpu_precompute"]["choice"])
    memory = vertex_memory(precompute)

    # -- pages: resident or streamed -----------------------------------------------------
    forced = config.GPU_TRANSFER
    selective_transfers = choose(
        "selective_transfers", decisions.selective_transfers,
        declared=bool(declared.apply_keeps_best), host_copies=host_copies, forced=forced)
    wire = wire_bytes(store, reads_weights)
    largest = max(wire, default=0)
    accum_size = np.dtype(translated.accum_dtype).itemsize
    selective_bytes = selective_device_bytes(store.num_vertices, accum_size, largest,
                                             len(store.pages)) if selective_transfers else 0
    pages = _page_plan(store, memory, wire, n_streams, selective_bytes, packed_layouts,
                       compressed_layouts, reads_weights=reads_weights,
                       pull_packed=on("pull_packed"),
                       packing=on("packed_pages"), compressing=on("compressed_pages"), deferring=on("defer_selective_arrays"),
                       forced=forced)
    entries.update(pages.pop("entries"))

    # -- sparse iterations ---------------------------------------------------------------
    plan: PagePlan = pages["pages"]
    entries["gpu_push"] = decisions.fixed(
        decisions.gpu_push, declared=bool(declared.apply_keeps_best), enabled=on("gpu_push"))
    push = bool(entries["gpu_push"]["choice"])
    larger_first = declared.sum == "max"
    entries["gpu_value_priority"] = decisions.fixed(
        decisions.gpu_value_priority, declared=bool(declared.value_priority),
        synchronous=synchronous, push=push, larger_first=larger_first,
        width_configured=config.GPU_BUCKET_WIDTH is not None,
        enabled=on("gpu_value_priority"))
    priority = bool(entries["gpu_value_priority"]["choice"])
    persistent = choose("persistent_loop", decisions.gpu_persistent_loop, push=push)
    fused = choose("fused_push", decisions.gpu_fused_push, persistent=persistent,
                   synchronous=synchronous, activate_is_change=activate_is_change(program),
                   value_bytes=np.dtype(translated.value_dtype).itemsize)
    push_bytes = (0, 0)
    if push:
        weights = store.weighted and "weight" in gather_parameters
        push_bytes = (accum_size, store.weight_dtype.itemsize if weights else 0)
    loop_bytes = device_loop.extra_bytes(store.num_vertices, store.num_edges,
                                         store.vertex_dtype.itemsize, *push_bytes,
                                         priority=priority, fused=fused)
    free_bytes = plan.budget - plan.vertex_bytes - plan.page_bytes
    entries["device_loop"] = types.MappingProxyType({after: decisions.fixed(
        decisions.device_loop, enabled=on("device_loop"), resident=plan.resident,
        aggregates=bool(translated.aggregate_monoids), host_copies=host_copies,
        checkpoints_after_pages=after, extra_bytes=loop_bytes, free_bytes=free_bytes,
        notify_pull=decisions.notify_pull_computes_pull(apply_reads_per_iteration(program)))
        for after in (False, True)})
    selective = pages["selective_room"]
    if plan.resident and selective_transfers:
        # every page fits, the device loop's arrays do not: sparse iterations choose
        # per page all the same (skip, pull, or push from pinned host memory)
        selective = choose("resident_selective", decisions.resident_selective,
                           loop_bytes=loop_bytes, selective_bytes=selective_bytes,
                           free_bytes=free_bytes)
    if selective:
        entries["selective_pushes"] = types.MappingProxyType({fits: decisions.fixed(
            decisions.selective_pushes, pinned_fits=fits, pushes_values=reads_weights)
            for fits in (True, False)})
    prefetch = choose("prefetch_next_copies", decisions.prefetch_next_copies,
                      resident=plan.resident, selective=selective)
    settled_pages = choose("settled_pages", decisions.gpu_settled_pages,
                           final_once_set=bool(declared.final_once_set),
                           synchronous=synchronous, resident=plan.resident,
                           selective=bool(selective), reads_storage=bool(reads_storage))
    loop = bool(entries["device_loop"][False]["choice"])
    union_find = choose(
        "gpu_union_find_start", decisions.gpu_union_find_start,
        declared=bool(declared.shortcut_labels), symmetric=not store.directed,
        resident=plan.resident, extra_bytes=union_find_bytes(
            store.num_vertices, store.vertex_dtype.itemsize, offsets_shared=loop),
        free_bytes=free_bytes - (loop_bytes if loop else 0)
        - (selective_bytes if plan.resident and selective else 0))
    entries["fused_launch"] = types.MappingProxyType({after: decisions.fixed(
        decisions.fuse_gpu_launch, resident=plan.resident, fuse_enabled=on("fused_launch"),
        host_copies=host_copies, synchronous=synchronous, checkpoints_after_pages=after,
        num_pages=len(store.pages)) for after in (False, True)})
    return GpuPlan(
        synchronous=synchronous, pages=plan, precompute=precompute,
        selective_transfers=selective_transfers, selective_bytes=selective_bytes,
        largest_wire_bytes=largest,
        packed_layouts=types.MappingProxyType(pages["packed_layouts"]),
        raw_buffers=pages["raw_buffers"], decode_edges=pages["decode_edges"],
        selective_room=pages["selective_room"],
        transfer_forced=forced,
        release_pages=pages["release_pages"], pull_packed=on("pull_packed"), push=push,
        value_priority=priority, larger_first=larger_first, persistent_loop=persistent,
        fused_push=fused,
        device_loop=loop, selective=bool(selective), union_find_start=union_find,
        prefetch_next_copies=prefetch, settled_pages=settled_pages,
        selective_when_pays=on("selective_when_pays"),
        calibrate_transfer_rates=on("calibrate_transfer_rates"), turned_off=off,
        entries=types.MappingProxyType(entries))


def _page_plan(store, memory: VertexMemory, wire: list, n_streams: int, selective_bytes: int,
               packed_layouts: Callable[[], dict], compressed_layouts: Callable[[], dict], *,
               reads_weights: bool, pull_packed: bool, packing: bool, compressing: bool, deferring: bool,
               forced: str) -> dict:
    """The pages' plan (:func:`plan_pages`), packed where that pays
    (:func:`decisions.packed_pages`), the pages stored compressed shipped so
    where that pays (:func:`decisions.compressed_pages`), the selective arrays
    deferred where their room holds pages
    (:func:`decisions.defer_selective_arrays`); with its entries."""
    pages = store.pages
    entries = {}
    # the resident arrays' padding: one run of the pull kernel past the last edge
    run_padding = RESIDENT_PADDING_EDGES * (
        store.vertex_dtype.itemsize + 2 + (store.weight_dtype.itemsize if store.weighted
                                           else 0))
    vertex_bytes = memory.vertex_bytes + run_padding
    page_edges = [p.num_edges for p in pages]
    plan_arguments = dict(page_edges=page_edges, selective_bytes=selective_bytes,
                          order=config.GPU_RESIDENT_ORDER)
    wire_sizes = [size + PAGE_SLACK_BYTES for size in wire]
    plan = plan_pages(wire_sizes, vertex_bytes, memory.budget, n_streams, **plan_arguments)
    layouts, raw_buffers, packed_sizes, decode_edges = {}, True, None, 0
    weight_size = store.weight_dtype.itemsize if store.weighted else 0
    if not plan.resident:
        layouts = dict(packed_layouts())
        packed_sizes = [layouts[k].nbytes + PAGE_SLACK_BYTES if k in layouts else wire_sizes[k]
                        for k in range(len(pages))]
        entries["packed_pages"] = decisions.fixed(
            decisions.packed_pages, enabled=packing, wire_bytes=int(sum(wire_sizes)),
            packed_bytes=int(sum(packed_sizes)))
        if entries["packed_pages"]["choice"]:
            # a stream's buffer for an unpacked page: only to unpack into, or for a
            # page that streams as stored (one the host does not hold)
            raw_buffers = not (pull_packed and len(layouts) == len(pages))
            plan = plan_pages(wire_sizes, vertex_bytes, memory.budget, n_streams,
                              packed_sizes=packed_sizes, raw_buffers=raw_buffers,
                              **plan_arguments)
        else:
            layouts = {}
        compressed = dict(compressed_layouts())
        if compressed:
            # the decoder's CSC index is on the device for the run, beside the vertex data
            index_bytes = (store.num_vertices + 1) * gpu_codec.offsets_dtype(
                store.num_edges).itemsize
            entries["compressed_pages"] = decisions.fixed(
                decisions.compressed_pages, enabled=compressing,
                compressed_bytes=int(sum(compressed[k].nbytes + PAGE_SLACK_BYTES
                                         for k in compressed)),
                other_bytes=int(sum(layouts[k].nbytes + PAGE_SLACK_BYTES if k in layouts
                                    else wire_sizes[k] for k in compressed)),
                index_bytes=int(index_bytes))
            if entries["compressed_pages"]["choice"]:
                # a stream's buffer for decoded pages, a group of shards at a time (the
                # pull reads the plain layout); one for whole pages only where some page
                # streams as stored or unpacks
                layouts.update(compressed)
                raw_buffers = not (pull_packed and len(layouts) == len(pages))
                vertex_bytes += index_bytes
                shard_edges = store.shards["edge_end"].astype(np.int64) \
                    - store.shards["edge_begin"].astype(np.int64)
                entries["decode_buffer"] = decisions.fixed(
                    decisions.decode_buffer_edges,
                    largest_page_edges=max(pages[k].num_edges for k in compressed),
                    largest_shard_edges=int(shard_edges.max(initial=0)),
                    block_edges=page_codec.BLOCK_EDGES)
                decode_edges = int(entries["decode_buffer"]["choice"])
                decode_bytes = gpu_codec.decode_buffer_offsets(
                    decode_edges, store.vertex_dtype.itemsize,
                    weight_size if reads_weights else 0)["nbytes"] + PAGE_SLACK_BYTES
                packed_sizes = [layouts[k].nbytes + PAGE_SLACK_BYTES if k in layouts
                                else wire_sizes[k] for k in range(len(pages))]
                plan = plan_pages(wire_sizes, vertex_bytes, memory.budget, n_streams,
                                  packed_sizes=packed_sizes, raw_buffers=raw_buffers,
                                  decode_bytes=decode_bytes, **plan_arguments)
    selective_room = bool(not plan.resident and plan.selective_bytes)
    release_pages = None
    if selective_room and plan.packed_pages is not None:
        # the pages the selective arrays' room holds, packed, until a sparse iteration
        # makes the arrays (PageStore.release)
        kept = plan.resident_pages | plan.packed_pages
        room = plan.budget - plan.vertex_bytes - plan.page_bytes
        extra = transfer.pages_kept_until_sparse(kept, packed_sizes, page_edges, room,
                                                 config.GPU_RESIDENT_ORDER)
        extra_bytes = int(np.asarray(packed_sizes, np.int64)[extra].sum())
        entry = entries["defer_selective_arrays"] = decisions.fixed(
            decisions.defer_selective_arrays, forced=forced,
            packed_streams=bool(entries["packed_pages"]["choice"] and not raw_buffers),
            displaced_bytes=extra_bytes, enabled=deferring)
        if entry["choice"]:
            entry["kept_until_sparse"] = int(extra.sum())
            release_pages = extra
            # the arrays' room holds pages until the arrays are made
            plan = dataclasses.replace(plan, packed_pages=plan.packed_pages | extra,
                                       page_bytes=plan.page_bytes + extra_bytes,
                                       selective_bytes=0)
    return {"pages": plan, "packed_layouts": layouts, "raw_buffers": raw_buffers,
            "decode_edges": decode_edges,
            "selective_room": selective_room, "release_pages": release_pages,
            "entries": entries}
