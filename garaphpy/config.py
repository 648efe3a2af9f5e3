"""Every tunable default of garaphpy, in one place.

Kernels, the store builder and the scheduler read their thresholds from
here; tests patch these values (tiny shards, tiny pages) to force multi-shard
and multi-page paths on small graphs.  Values that depend on the machine
(memory, cores) are computed by the functions at the bottom, never frozen in.
"""

from __future__ import annotations

import os
import time

# ---------------------------------------------------------------- the store --
#: Version of the on-disk store layout; a store of another version is rebuilt.
STORE_FORMAT_VERSION = 1
#: Version of a store whose pages are compressed (``store.compress``): a
#: garaphpy that reads only plain pages refuses it instead of misreading it.
COMPRESSED_STORE_FORMAT_VERSION = 2
#: Store versions this garaphpy opens.
READABLE_STORE_FORMAT_VERSIONS = (STORE_FORMAT_VERSION, COMPRESSED_STORE_FORMAT_VERSION)

#: Vertex ids are int32 below this many vertices, int64 from it on (a test
#: lowers it to exercise the int64 layout on small graphs).
INT32_VERTEX_LIMIT = 2**31

#: Shared memory one GPU thread block uses for its accumulators when shards are
#: cut (Garaph section 2.1: "one block of GPU threads can use up to 48KB").
#: The GPU kernel may opt in to more at run time; the store is cut for this.
SHARD_SHARED_MEMORY_BYTES = 48 * 1024

#: Bytes of one accumulator slot assumed when cutting shards (S_vertex >= 32
#: bits in section 2.1).  8: the built-in programs accumulate float64 or
#: int64, and a shard cut for 4-byte slots would need 96 KB of shared memory,
#: which leaves room for only two blocks per multiprocessor.
SHARD_SLOT_BYTES = 8

#: IdxOff is a 16-bit offset from the shard's first vertex, so a shard never
#: holds more destination vertices than this.
MAX_SHARD_VERTICES = 1 << 16

#: Edges one shard carries at most.  One GPU block processes one shard; a
#: vertex with more in-edges than this is split over several shards whose
#: partial sums combine through the sum monoid.
MAX_SHARD_EDGES = 1 << 16

#: Shards a graph is cut into at least, when its edges allow (one GPU block per
#: shard: 1024 is about two waves of 4 blocks on each of 132 multiprocessors),
#: and the fewest edges a shard is cut to for that.
MIN_SHARDS = 1024
MIN_SHARD_EDGES = 1024

#: In-memory store builds of at most this many edges sort with numpy instead
#: of the parallel numba kernels: compiling those takes about 3 s on a
#: machine's first build, sorting 2^18 edges with numpy about 20 ms.
NUMPY_SORT_MAX_EDGES = 1 << 18

#: Build kernels without calls to other kernels (duplicate merging, segment
#: compaction) run as plain Python on inputs of at most this many items: the
#: same code, interpreted in about 30 ms, where compiling it takes about 0.9 s
#: on a machine's first build.
INTERPRET_MAX_ITEMS = 1 << 15

#: Largest replication factor R_i (Equation 2: 2^min(..., 5)).
MAX_REPLICATION = 32

#: Number of CUDA streams pages are pipelined on (section 5.2).
N_STREAMS = 4

#: Threads per GPU block of the pull kernel (one block per shard).  A shard of
#: 2^16 edges gives each thread 64-128 edges; with the 96 KB of float64
#: accumulators a 48 KB-cut shard needs, two blocks of 512 fit an SM.
GPU_THREADS_PER_BLOCK = 512

#: Consecutive edges one thread of the pull kernel takes at a time: their
#: sources and offsets are read as vectors, their gathers are in flight
#: together, and the edges of one destination within them are combined in
#: registers before one replica atomic (1: one edge per thread and round, the
#: paper's kernel).  A power of two up to 16.
GPU_EDGES_PER_THREAD = 8

#: Lanes of one warp that merge a vertex's R_i replicas after the gather (a
#: power of two up to 32).  Each lane first merges R_i / lanes of them in shared
#: memory, then the lanes merge by register shuffles, with no barrier between
#: strides.  8 measured faster than one barrier per stride and than 32 lanes
#: (BENCHMARKS.md, "Replica merge").
GPU_MERGE_LANES = 8

#: How a shard's replication factor R_i (Garaph Equation 2) measures the
#: contention on its accumulators: "mean" (|E_i| / |V_i|, as published) or
#: "edge-weighted" (sum of d^2 over |E_i|: how many edges share an edge's
#: destination), divided by REPLICATION_EDGES_PER_THREAD (layout.cut_shards).
#: The published rule measured best with the run-combining kernel too
#: (BENCHMARKS.md, "Replication"); the others are kept for study.
REPLICATION_RULE = "mean"
REPLICATION_EDGES_PER_THREAD = 1

#: The GPU's iteration is a sparse notify-pull when the frontier's out-edges are
#: at most |E| / GPU_SPARSE_FACTOR (:func:`garaphpy.scheduler.decisions.gpu_sparse_pass`).
GPU_SPARSE_FACTOR = 10.0

#: ... and when its notified vertices have at most |E| / GPU_SPARSE_PULL_FACTOR
#: in-edges; else the device loop calls the iteration off and the host pulls
#: over every shard (:func:`garaphpy.scheduler.decisions.gpu_pull_edges`).
GPU_SPARSE_PULL_FACTOR = 3.0

#: ... and not before this iteration, unless forced: a run of few iterations (a
#: low-diameter graph) keeps the host's pulls, whose round trips cost less than
#: entering the loop; a run of thousands loses only these first ones
#: (:func:`garaphpy.scheduler.decisions.gpu_sparse_pass`; BFS on
#: soc-Slashdot0811 took 1.28 ms with the loop from the start, 1.02 without, on
#: an H200, 2026-11-27).
GPU_LOOP_AFTER_ITERATIONS = 8

#: ... and when no vertex of the frontier or of the notified ones has more than
#: GPU_SPARSE_SPAN_FACTOR times the pull's edges per thread, per lane of the group
#: that takes it (:func:`garaphpy.scheduler.decisions.gpu_span_edges`).
GPU_SPARSE_SPAN_FACTOR = 4.0

#: The bucket width of those runs; None: ``GPU_BUCKET_FACTOR`` times the rule of
#: ``scheduler.decisions.bucket_width`` (mean edge value / mean in-degree), for
#: programs with a ``min`` sum only: a ``max`` program (SSWP) takes buckets only
#: with a width set here (``scheduler.decisions.gpu_value_priority``).
GPU_BUCKET_WIDTH = None

#: ... the factor (a GPU iteration costs its launches whatever the frontier: wider
#: buckets than the CPU's, fewer of them; BENCHMARKS.md).
GPU_BUCKET_FACTOR = 64.0

#: Iterations the device loop captures in one CUDA graph; the host launches the
#: graph, and reads the loop's state back every launch.
GPU_LOOP_GRAPH_ITERATIONS = 16

#: Sparse iterations a run launches one by one before it captures the graph
#: (a short run never pays for the capture).
GPU_LOOP_GRAPH_AFTER = 16

#: Iterations one device-loop batch runs at most before the driver regains
#: control (callbacks, Ctrl-C and checkpoints act between batches).
GPU_LOOP_MAX_STEPS = 1024

#: A run on the GPU alone of a program declaring ``shortcut_labels`` (CC) ends
#: each pull over every shard with pointer jumping over every vertex's label
#: (the CPU's ``CPU_SHORTCUT_LABELS``).
GPU_SHORTCUT_LABELS = True

#: ... from this iteration on: a low-diameter graph's labels settle in a few
#: pulls, which the pass over every vertex would only slow (rmat:22 CC took
#: 7.0-7.2 ms with it from the first pull, 6.4-6.6 without, on an H200,
#: 2026-11-27); a grid's take thousands of pulls without it.
GPU_SHORTCUT_LABELS_AFTER = 8

#: Pages that do not all fit the GPU budget: which stay resident
#: beside the stream buffers.  "edges": the pages with the most edges per byte
#: first (a tie: the store's order); "order": the store's order.
GPU_RESIDENT_ORDER = "edges"

#: How each streamed page reaches the GPU in an iteration of a program
#: declaring ``apply_keeps_best`` (:mod:`garaphpy.scheduler.gpu.transfer`): "auto"
#: (the cost model's choice per page), or one choice forced for study: "copy"
#: (every page whole, every iteration: Garaph's stream), "skip" (pages no
#: active vertex reaches are skipped, the others copied whole), "compact" (the
#: active vertices' edges gathered on the host and copied: Subway's SubCSR),
#: "zero-copy" (the GPU reads the active vertices' edges from pinned host
#: memory: EMOGI).
GPU_TRANSFER = "auto"


#: Streams of their own for the pulls of pages kept on the device that read no
#: stream buffer, taken in turn (0: they share the copied pages' streams).
GPU_KEPT_PAGES_STREAMS = 4

#: The dense iterations a run whose frontier has not yet shrunk (a traversal's
#: first iterations) is expected still to have: releasing pages for its
#: selective arrays costs each of them the released pages' copies.
GPU_RELEASE_DENSE_ITERATIONS = 2

#: The cost model's starting rates, before it has measured any (bytes/s over
#: the host link, edges/s of the host threads' gather, bytes/s of the GPU's
#: reads of pinned host memory).
GPU_BUS_BYTES_PER_SECOND = 20e9
GPU_GATHER_EDGES_PER_SECOND = 1e9
GPU_ZERO_COPY_BYTES_PER_SECOND = 8e9
#: ... and edges/s of the GPU's pull over a page kept on the device, as it is
#: and packed (the pull priced against pushing the page's active edges).
GPU_PULL_EDGES_PER_SECOND = 40e9
GPU_PACKED_PULL_EDGES_PER_SECOND = 25e9

#: Weight of a new measurement in the transfer rates' running estimates.
GPU_TRANSFER_SMOOTHING = 0.5

#: Fraction of the free GPU memory a build or a run may use when no budget is
#: given (:func:`gpu_budget`).
GPU_MEMORY_FRACTION = 0.8

#: Weight of a new measurement in the dispatcher's running estimates of the
#: CPU and GPU pull rates and of T_pull / T_GPU (section 5.1).
HYBRID_SMOOTHING = 0.5

#: The most one CPU notify-pull may multiply the dispatcher's T_notify by
#: (before smoothing).  A notify-pull of a few vertices spends almost all
#: its time on fixed costs; the rest, divided by its tiny share of the
#: edges, once priced every later CPU iteration of grid:2000x2000 SSSP as
#: a whole pull (a 51 ms hiccup at a share of 1e-6), and the CPU, 2x
#: cheaper than the GPU there, never got an iteration again.
HYBRID_NOTIFY_RISE = 4.0

#: A CPU notify-pull whose predicted work is below c_0 still measures
#: T_notify when it took more than this many times c_0 beyond c_0
#: (:func:`garaphpy.scheduler.decisions.notify_measures_t_notify`).
HYBRID_NOTIFY_EXCESS = 4.0

#: What the dispatcher expects an iteration of the GPU's device loop to cost, in
#: seconds, until a hybrid run has measured one (grid:2000x2000 BFS on an H200
#: ran 14.9 us an iteration, BENCHMARKS.md).
HYBRID_LOOP_ITERATION_SECONDS = 20e-6

#: What a hybrid run expects the fixed part of a GPU iteration that runs a
#: sparse pass (its frontier's out-edges, not every page) to cost, in
#: seconds, until it has measured one; the part per out-edge comes from the
#: GPU engine's transfer rates (``GpuEngine.sparse_edge_seconds``).  kron:24
#: with a quarter of its pages on an H200 (pages streamed, selective
#: transfers): 1.1-2.9 ms an iteration for frontiers of 20-12,000 out-edges
#: (BENCHMARKS.md).
HYBRID_GPU_SPARSE_OVERHEAD_SECONDS = 1e-3

#: The per-run choice of a hybrid run (``scheduler.decisions.run_processors``):
#: leaving the processors it runs on for others takes an estimate of the
#: run's rest at most this share of staying's (the estimates are a model's;
#: a choice flips on a real move, not on noise).
HYBRID_RUN_SWITCH_MARGIN = 0.8

#: The host's own work in an iteration both processors may share (deciding,
#: synchronizing, combining), in seconds, until a hybrid run has measured its
#: own: what running one processor alone in its own loop saves an iteration
#: (grid and road PageRank on an H200: 0.05-0.1 ms of 0.2-0.3 ms iterations).
HYBRID_DISPATCH_SECONDS = 50e-6

#: The most iterations a hybrid run's per-run choice covers (a stretch); the
#: choice is made again at a stretch's end, or earlier when the frontier
#: crosses the cost model's switch point.  The first stretch is
#: ``HYBRID_RUN_FIRST_STRETCH`` iterations and each next one twice the last,
#: so that the costs measured in the first iterations weigh early and a
#: long run cuts the batches of the processor it runs alone (the GPU's
#: device loop, the CPU's sparse batches) a few times only (as many as
#: ``GPU_LOOP_MAX_STEPS`` cuts the loop's).
HYBRID_RUN_STRETCH_ITERATIONS = 1024

#: The first stretch of a hybrid run's per-run choice, in iterations.
HYBRID_RUN_FIRST_STRETCH = 2

#: A graph whose in-degree skew (``scheduler.decisions.in_degree_skew``) is at
#: most this is taken for a mesh (roads, grids): a frontier program crosses
#: it in about sqrt(|V|) iterations, not the log(|V|) of a power-law graph
#: (``scheduler.decisions.expected_iterations``).
HYBRID_MESH_SKEW = 1.5

#: A union-find start (Afforest) priced in full pulls over |E| of the processor
#: that takes it (one pass over the edges, as a pull passes over the in-edges;
#: the GPU's start reads fewer, unmeasured against its pull).
HYBRID_UNION_FIND_PULLS = 1.0

#: What making the CPU-alone engine of a hybrid run costs (its own vertex
#: state and settled vertices, set up when the per-run choice first gives it
#: the run), in whole copies of the vertex data between host and GPU; it is
#: made only for its union-find start or a run's rest on the CPU estimated to
#: take longer (``scheduler.decisions.cpu_alone_engine``).
HYBRID_CPU_ALONE_BUILD_COPIES = 10.0

#: Iterations a hybrid run expects a program to take when nothing says
#: more (no graph shape known to the driver).
HYBRID_RUN_ITERATIONS_PRIOR = 16

#: What a hybrid run expects setting the GPU up to cost, in seconds, beside
#: copying its pages (``scheduler.set_up_choice.gpu_set_up_seconds``): the first
#: in a process imports cupy and makes the CUDA context; a later one takes
#: what the process measured.  The H200 host, ``garaphpy pagerank`` on kron22
#: (BENCHMARKS.md, first minute): 1.36 s of set-up, 0.43 s of it the copy.
HYBRID_GPU_FIRST_SET_UP_SECONDS = 0.9

#: What a later GPU set-up of a process is expected to cost beside copying
#: its pages, before one is measured: the H200 host, 2026-12-04, 12-55 ms on
#: the SNAP files (``scheduler.set_up_choice.MeasuredSetUps``).
HYBRID_GPU_SET_UP_SECONDS = 0.03

#: Bytes a second a hybrid run expects its pages to reach the GPU at its
#: set-up, read and checked on the host first (the same run: 0.77 GB of
#: pages in 0.43 s).
HYBRID_GPU_SET_UP_BYTES_PER_SECOND = 1.8e9

#: What one whole-graph GPU iteration costs beside its edges, before a run
#: measures its own: the H200 host, 2026-12-05, PageRank's 20 iterations
#: (the whole call less its set-up): 0.23 ms an iteration on ca-HepPh, 0.26
#: on web-NotreDame, 0.32 on soc-Slashdot0811.
HYBRID_GPU_ITERATION_SECONDS = 0.23e-3

#: Edges a second the GPU is expected to pull with every page resident: the
#: same run, kron22 (128M edges) in 1.37 ms an iteration, 0.23 of it fixed.
HYBRID_GPU_EDGES_PER_SECOND = 1.1e11

#: What a hybrid run's CPU side adds to its set-up, per vertex, beside the
#: GPU's (the CPU engine, the host's vertex data pinned, the probe of both
#: processors): the H200 host, 2026-12-05, kron22 PageRank at a quarter of
#: its pages, 0.437 s of set-up against the GPU mode's 0.264 (4.2M vertices).
HYBRID_SHARING_SET_UP_SECONDS_PER_VERTEX = 40e-9

#: In-edges a second one CPU thread is expected to pull, before a hybrid run
#: has measured its own (the same host: a 16-thread PageRank iteration of
#: kron22's 128M edges in 45 ms).
HYBRID_CPU_EDGES_PER_SECOND_PER_THREAD = 1.8e8

#: What one CPU iteration costs beside its edges, before a hybrid run has
#: measured its own: the H200 host, 16 threads, 2026-12-04 (no BLAS thread
#: spinning beside numba's since): 0.12-0.35 ms an iteration of PageRank
#: beyond its edges, 0.12-0.2 ms a BFS level, 0.2-0.33 ms an asynchronous
#: SSSP iteration on the SNAP files.
HYBRID_CPU_ITERATION_SECONDS = 0.2e-3

#: Expected levels (``scheduler.decisions.expected_iterations``) from which a
#: frontier program's levels are priced as sparse before a hybrid run sets
#: anything up (``scheduler.set_up_choice.expected_work``): a mesh's
#: frontiers are a thin band, no level a whole pull.
HYBRID_SPARSE_LEVELS = 64

#: What a sparse level of a frontier program costs the CPU alone, in seconds,
#: beside its edges, counted per expected level
#: (``scheduler.set_up_choice.cpu_run_seconds``; ``expected_iterations`` is
#: sqrt(|V|), about half the levels from a grid's hub): BFS's iterations, 16
#: threads, took 42 us an expected level on grid:2000x2000 and 33-36 us on road
#: NE (the H200 host, 2026-12-05; road NE 33-35 us on the H100 host the same day).
HYBRID_CPU_LEVEL_SECONDS = 40e-6

#: The same for a round of a program that reads edge weights (its expected
#: levels times ``HYBRID_WEIGHTED_ROUNDS_PER_LEVEL``): SSSP's iterations took
#: 63 us a round on grid:2000x2000 and 70 us on road NE (the H200 runs above;
#: 40 us on road NE on the H100 host).
HYBRID_CPU_ROUND_SECONDS = 60e-6

#: How many more iterations than its expected levels a frontier program that
#: reads edge weights takes on the CPU (asynchronous relaxation rounds of
#: integer weights 1..255 against BFS's levels on the same graphs, the H200
#: host, 2026-12-04: 1.0-1.7 on kron22 and the SNAP files, whose SSSP takes
#: no buckets of values; 1.8 on a 1000x1000 grid in buckets).
HYBRID_WEIGHTED_ROUNDS_PER_LEVEL = 2.0

#: The GPU's vertex data a vertex, as a hybrid run estimates it before the
#: GPU is set up, to know whether every page fits beside it
#: (``scheduler.set_up_choice.gpu_alone``): values, attributes and frontier
#: flags, about 40 bytes on kron24 (the storage tier's figures), with room.
HYBRID_GPU_VERTEX_BYTES = 64

#: Pages the GPU worker keeps queued on its streams in a hybrid iteration
#: (at least this many, and one per stream when pages stream).
HYBRID_GPU_PAGES_IN_FLIGHT = 4

#: GPU memory assumed available to pages when no GPU is visible at
#: preprocessing time (bytes).
DEFAULT_GPU_MEMORY_BYTES = 4 << 30

#: A page is never larger than this, so that CPU and GPU both get pages in a
#: hybrid iteration and a stream's copy overlaps the previous page's kernel.
MAX_PAGE_BYTES = 64 << 20

#: Pages are written in data blocks of this size, hashed across the storage
#: directories (section 2.2).  A multiple of 4096 so blocks can be read with
#: O_DIRECT.
BLOCK_BYTES = 8 << 20

#: Alignment of data blocks inside the block files.
BLOCK_ALIGNMENT = 4096

#: A graph keeps the CSC its first run in host memory read from the store, so
#: that its later runs in memory read no page, and the out-edges' values a run
#: in buckets placed from it (``InMemoryPages.out_edge_values``);
#: ``Graph.release_memory`` frees them, a run whose host budget streams pages
#: frees them first.  And a GPU run whose pages all fit the device keeps its
#: edge arrays there for the next GPU run over the same store (one store at a
#: time; a run over another store, or one whose pages stream, frees them
#: first).  False: each such run reads every page again and keeps nothing.
KEEP_CSC_BETWEEN_RUNS = True

#: Fraction of the available host memory preprocessing may use.
HOST_MEMORY_FRACTION = 0.5

# ----------------------------------------------------------- out of core --
#: Fraction of the available host memory a run may use for page images kept in
#: host memory between iterations, the vertex arrays and the read-ahead buffers
#: counted against it (:mod:`garaphpy.storage.host_budget`).
HOST_CACHE_FRACTION = 0.5

#: A run whose pages stream from storage revises between iterations which
#: pages the host budget holds, by how often the iterations ask for each
#: (:func:`garaphpy.storage.decisions.revise_host_pages`): a frontier's
#: pages stay in memory as it moves.  False: the pages first placed stay.
HOST_PAGES_BY_REUSE = True

#: Host memory a run needs per vertex beside the store's arrays, counted
#: against the host budget before pages are (values, the synchronous next
#: buffer, the frontier, flags, attributes, the pinned copies of hybrid runs:
#: a bound for 8-byte values).
HOST_BYTES_PER_VERTEX = 64

#: Bytes of page buffers a :class:`~garaphpy.storage.page_io.PageReader` may
#: have outstanding at once (pages read ahead of the consumer plus the one it
#: holds): four pages of the largest size.
PAGE_READAHEAD_BYTES = 4 * MAX_PAGE_BYTES

#: Reader threads per storage directory, each with one read in flight: with
#: one, a device idles between the end of a read and the next request.
READS_IN_FLIGHT_PER_DIRECTORY = 2

#: Threads of one page reader decoding compressed pages (a reader whose
#: pages its decoder threads decode, :data:`PAGE_DECODE`), each a page at a
#: time (a few hundred million edges a second each): enough to keep up with
#: a disk at 2 bytes an edge, few enough to leave the cores to the run.
PAGE_DECODERS_PER_READER = 4

#: Who decodes the compressed pages each consumer's page reader streams
#: (:class:`~garaphpy.storage.page_io.PageReader`'s ``decode``): the CPU
#: itself, each page's blocks in parallel on numba's threads when it takes
#: the page (decoder threads beside kernels on every core stall their
#: parallel sections: on the 2-core dev VM, kron:20 from disk, CC took 144
#: ms an iteration against 206 with them, PageRank 172 against 190; with
#: other processes on the cores the two were even); the GPU's reader in its
#: decoder threads, ahead of it, on cores its kernels leave idle.
PAGE_DECODE = {"cpu": "consumer", "gpu": "threads"}

#: Cores left to the reader and checksum threads of each storage directory
#: when a run streams pages and its thread count is the default (at most a
#: quarter of the cores): its reads in flight and its checker.  Kernel
#: threads on every core starve them: on a 16-core host streaming rmat:22
#: PageRank from one disk, 16 threads read 1.0 GB/s, 13 threads 1.6 GB/s.
STREAMING_CORES_PER_DIRECTORY = READS_IN_FLIGHT_PER_DIRECTORY + 1

#: Threads that read pages from the store into pinned buffers (one each) while
#: a GPU run copies its resident pages to the device at set-up: the reads and
#: their checksums are most of that set-up (kron22, 0.77 GB: 0.43 s on one).
DEVICE_UPLOAD_READERS = 4

#: The fixed read-ahead window of ``bench/disk.py`` (pages, at most
#: PAGE_READAHEAD_BYTES); a run sizes its own by the disk's measured speed
#: (:func:`garaphpy.storage.decisions.readahead_pages`).
PAGE_READAHEAD_PAGES = 8

#: k, the sequential over random read speed of secondary storage, used as rho
#: for pages not held in host memory (Garaph section 4.2).  None measures it
#: per storage directory once (:mod:`garaphpy.storage.read_ratio`); a number
#: >= 1 fixes it.
READ_RATIO = None

#: Size of the temporary file k is measured on, the size of one random read,
#: how many random reads are made at most and for how long at most (seconds).
READ_RATIO_FILE_BYTES = 32 << 20
READ_RATIO_RANDOM_BYTES = 4096
READ_RATIO_RANDOM_READS = 512
READ_RATIO_RANDOM_SECONDS = 0.15

#: Sequential read speed of the storage directories, bytes a second, for the
#: build's choice of page format and the page reader's read-ahead
#: (:mod:`garaphpy.storage.decisions`).  None measures it once per device
#: (:func:`garaphpy.storage.read_ratio.disk_read_speed`); a number fixes it.
DISK_READ_BYTES_PER_SECOND = None

#: The speed taken for a directory that cannot be measured: a PCIe 3 x4 NVMe
#: SSD's sequential read (3.5 GB/s, e.g. Samsung 970 EVO Plus's data sheet),
#: above the 1.1-1.7 GB/s the H200 host's virtio disk read
#: (bench/results/compressed-pages-devvm-2026-12-02.md), so compression must
#: earn its keep.
ASSUMED_DISK_READ_BYTES_PER_SECOND = 3.5e9

#: Edges a build measures its pages' compression on (``store.compress =
#: "auto"``): pages spread over the store, encoded and decoded, timed.
COMPRESS_SAMPLE_EDGES = 1 << 22

#: Edges parsed per chunk when streaming a text input.
READ_CHUNK_EDGES = 1 << 22

#: Bytes of decompressed input looked at to detect a file's format.
DETECT_BYTES = 64 << 10

#: Bytes a text header (Matrix Market banner and comments, DIMACS comments)
#: may take before detection gives up looking for its end.
HEADER_MAX_BYTES = 16 << 20

#: Bytes of a ``wel`` file that decide whether its weights are "int" or "real".
WEIGHT_PROBE_BYTES = 4 << 20

#: Bytes read from a text input per block.  A block is cut after its last
#: newline and the rest carried over, so a line longer than this only makes
#: the buffer grow.  Two blocks are in memory at once (read-ahead).  Larger
#: blocks were not faster (first-touch page faults of the buffers dominate).
TEXT_BLOCK_BYTES = 16 << 20

#: Bytes one parser task handles; a block is cut at newlines into pieces of
#: about this size, parsed concurrently.  Each worker keeps scratch arrays of
#: piece_bytes / 4 records (24 bytes each: 12 MB for 2 MiB pieces).
PIECE_BYTES = 2 << 20

#: Text parser threads; 0 means one per usable core, at most MAX_PARSE_WORKERS.
PARSE_WORKERS = 0
MAX_PARSE_WORKERS = 8

#: Seconds between two progress lines of long work.
PROGRESS_INTERVAL_S = 2.0

#: How long a store's full check (every CRC-32) stands: ``Store.open(verify="auto")``
#: checks only the files' sizes within it, when their sizes and modification
#: times are those the full check recorded (one week).
STORE_FULL_CHECK_VALID_S = 7 * 24 * 3600.0

#: A run's set-up compilation (or loading from numba's cache) that takes at
#: least this many seconds is logged as a step of its own, with its time.
COMPILE_SHOWN_AFTER_SECONDS = 0.1

# ------------------------------------------------------------- CPU engine --
#: Garaph section 4.2: notify-pull costs about 2 f rho of a pull, so the CPU
#: notify-pulls when f <= 1 / (NOTIFY_PULL_COST_FACTOR * rho).
NOTIFY_PULL_COST_FACTOR = 2.0

#: A notify-pull over pages read from disk copies the notified vertices'
#: in-edges out of the pages, and pulls over the copies once every page is
#: read (a pull's work overlaps its reads).  The CPU's direction from disk
#: prices each copied edge at this many edges of a pull
#: (:func:`garaphpy.scheduler.disk_decisions.disk_direction`): synchronous
#: SSSP on kron:16 from disk, 2 threads, broke even at 0.45 |E| copied.
NOTIFY_PULL_DISK_COPY_FACTOR = 2.0

#: rho for pages held in host memory (section 4.2); pages on secondary
#: storage use the measured sequential/random read ratio k instead.
RHO_IN_MEMORY = 1.0

#: A page's edges are cut into one part per thread, but no part is smaller
#: than this (tiny parts cost more to launch than they save).
CPU_MIN_PART_EDGES = 4096

#: Notify lists the notified vertices by a pass over the flags (sorted, no
#: candidate array) once the frontier's out-edges exceed |V| / this.
NOTIFY_DENSE_FACTOR = 16

#: Notify and notify-pull cut their vertex lists into this many chunks per
#: thread, balanced by degree.
CPU_CHUNKS_PER_THREAD = 4

#: A partition's worker pulls precomputed gathers with the one process's
#: fused kernel from this many threads on, page by page below
#: (:func:`garaphpy.distributed.fused.fused_partition_pull`).
PARTITION_FUSED_PULL_MIN_THREADS = 2

#: A run on the CPU alone executes its sparse notify-pull iterations many to
#: one kernel call (the run plan's ``sparse_batches``) once it has taken this
#: many of them one by one: a run with fewer (a power-law graph's handful)
#: gains nothing from batches and never compiles their kernel (about 2 s on a
#: machine's first run of a program).
CPU_SPARSE_BATCH_AFTER = 8

#: In such a call, an iteration's notify over at most this many out-edges,
#: and its gather over at most this many in-edges, run on one thread (no
#: parallel launch); larger ones run the parallel kernels.  None: by the
#: run's threads (:data:`CPU_SERIAL_EDGES_PER_THREAD`).
CPU_SERIAL_STEP_EDGES = None

#: Where ``CPU_SERIAL_STEP_EDGES`` is None, a part of such an iteration runs
#: on one thread unless each of the run's threads (at least 4) would get
#: more than this many edges: a parallel launch wakes every thread, and on
#: 16 threads a grid's steps of 4K-16K edges took longer on them than on
#: one (BENCHMARKS.md).
CPU_SERIAL_EDGES_PER_THREAD = 1024

#: An asynchronous run on the CPU of a program declaring ``value_priority``
#: takes its sparse iterations in buckets of values (the run plan's
#: ``value_priority``) on a graph whose in-degree skew
#: (``scheduler.decisions.in_degree_skew``: the mean in-degree of a notified
#: vertex over the mean in-degree) is at most this: on a power-law graph each
#: bucket's notify-pull reads the hubs' in-edges again, and buckets pushed in
#: rounds take many more iterations than the whole frontier's (the H200
#: host, 2026-12-04: 1.3-1.9x slower at skew 6.6-129, 8.7x faster at 1.0).
CPU_PRIORITY_MAX_SKEW = 4.0

#: The bucket width of those runs; None: the rule of
#: ``scheduler.decisions.bucket_width`` (mean edge value / mean in-degree).
CPU_BUCKET_WIDTH = None

#: Rounds of one call of buckets pushed in rounds, or of settling steps on
#: kept threads, at most (its threads meet once per call).
CPU_PUSH_ROUND_STEPS = 4096

#: In a batch of settling steps on kept threads (the run plan's
#: ``settle_rounds``), a level whose frontier has at most this many out-edges is
#: stepped by one thread while the others wait (two barriers cost more than
#: the level's edges shared out); None: :data:`CPU_ROUND_SERIAL_EDGES_PER_THREAD`
#: times the run's threads.
CPU_ROUND_SERIAL_EDGES = None

#: Where ``CPU_ROUND_SERIAL_EDGES`` is None: out-edges per thread of the run.
CPU_ROUND_SERIAL_EDGES_PER_THREAD = 64

#: After a pull, the shortcut first goes over this many vertices spread evenly
#: over the graph, and over every vertex only when at least
#: ``CPU_SHORTCUT_MIN_DROP`` of them took a smaller label: a grid's labels
#: drop almost everywhere (the shortcut saves hundreds of iterations), a
#: low-diameter graph's a few percent (the O(|V|) pass of random reads would
#: cost more than the iteration it might save).
CPU_SHORTCUT_SAMPLE = 4096
CPU_SHORTCUT_MIN_DROP = 0.25

#: A run with early exit (the run plan's ``early_exit``: a program final once
#: set) pulls once the frontier's out-edges times this exceed the in-edges of
#: the vertices not yet settled (Beamer's alpha) ...
CPU_SETTLING_PULL_FACTOR = 15

#: ... and goes back to notify-pull once its frontier shrinks below |V| / this
#: (Beamer's beta).
CPU_SETTLING_NOTIFY_FACTOR = 18

#: At most this many iterations per call of a sparse batch: records,
#: ``on_iteration``, checkpoints and Ctrl-C act between calls.
CPU_SPARSE_BATCH_STEPS = 256

#: Parts per thread of the fused pull (the run plan's ``fused_pull``: a pull
#: that also makes the next pull's gathers and aggregates), each of about equal in-edges plus
#: vertices, taken by whichever thread is free (dynamic scheduling).  One
#: part per thread leaves the whole pull waiting for its slowest thread:
#: 16 threads of the GPU host, PageRank's pull of a 4M-vertex grid 0.8x and
#: of kron22 0.9x the time of one part per thread (BENCHMARKS.md).
CPU_FUSED_PULL_PARTS_PER_THREAD = 16

#: The default thread count gives each thread at least this many edges, up to
#: every core: a small graph runs on one thread (a parallel launch and its
#: barrier cost more than its edges), a graph of 2^16 x cores edges or more
#: on every core (web-NotreDame, 1.5 M edges, on up to 22).
DEFAULT_EDGES_PER_THREAD = 1 << 16

#: Where the machine already has at least this many cores' worth of other
#: work when garaphpy is imported (sampled over the imports, at least
#: LOAD_SAMPLE_SECONDS: :func:`other_processes_busy_cores`), the OpenMP
#: workers wait passively (``OMP_WAIT_POLICY=PASSIVE``): spinning workers beside other busy
#: processes made BFS on web-NotreDame 5-25x slower on 2 threads
#: (garaphpy._numba_setup, BENCHMARKS.md).
LOADED_MACHINE_BUSY_CORES = 0.5
LOAD_SAMPLE_SECONDS = 0.05

# ------------------------------------------------------------- checkpoints --
#: A run with a checkpoint directory writes a checkpoint after every this
#: many iterations unless told otherwise (Garaph section 2.2: "after one or
#: several iterations").  Measured cost: BENCHMARKS.md, "Checkpoints".
CHECKPOINT_EVERY = 10

#: Checkpoints kept per run (the newest): two, so that a damaged newest one
#: still leaves one to resume from.
CHECKPOINT_KEEP = 2

# ------------------------------------------------------------- generators --
#: Graph500 / Kronecker initiator probabilities (d = 1 - a - b - c).
RMAT_A, RMAT_B, RMAT_C = 0.57, 0.19, 0.19
#: Average degree (edges per vertex) of generated RMAT graphs.
RMAT_EDGE_FACTOR = 16
#: Integer weights of generated graphs are drawn uniformly from 1..this.
GENERATOR_MAX_WEIGHT = 255
#: Seed used when none is given.
GENERATOR_SEED = 27491095


def available_host_memory() -> int:
    """Bytes of host memory available now (psutil), for default budgets."""
    import psutil

    return int(psutil.virtual_memory().available)


def default_host_budget() -> int:
    """Default host-memory budget for preprocessing, in bytes."""
    return int(available_host_memory() * HOST_MEMORY_FRACTION)


def gpu_budget(asked: int | None, held_bytes: int = 0, *,
               without_device: int | None = None) -> int:
    """The GPU memory a build or a run may use, in bytes: ``asked`` (the
    ``gpu_memory`` option) when given, else :data:`GPU_MEMORY_FRACTION` of the
    device's free memory and of ``held_bytes``, what the caller holds on the
    device already (a run's vertex data, made before its budget is resolved).
    The one rule of the build (which sizes pages for it) and the run.

    Without a device (cupy missing, or none visible), ``without_device`` when
    given (a build's :data:`DEFAULT_GPU_MEMORY_BYTES`), else what cupy raises.
    """
    if asked is not None:
        return int(asked)
    try:
        import cupy

        free = cupy.cuda.runtime.memGetInfo()[0]
    except Exception:
        if without_device is None:
            raise
        return int(without_device)
    return int(GPU_MEMORY_FRACTION * (free + held_bytes))


def usable_cores() -> int:
    """The cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def default_threads(num_edges: int | None = None) -> int:
    """CPU threads used by default: one per DEFAULT_EDGES_PER_THREAD edges,
    at least one, at most every core this process may use (every core when
    ``num_edges`` is None)."""
    cores = usable_cores()
    if num_edges is None:
        return cores
    return max(1, min(cores, int(num_edges) // DEFAULT_EDGES_PER_THREAD))


def _cpu_seconds() -> tuple[float, float, float] | None:
    """(monotonic seconds, the machine's busy CPU seconds, this process's CPU
    seconds) now, or None where ``/proc/stat`` cannot be read (not Linux).
    Busy is as psutil counts it: every CPU's time but idle and I/O wait."""
    try:
        with open("/proc/stat", "rb") as stat:
            fields = stat.readline().split()
        ticks = [int(field) for field in fields[1:9]]   # user .. steal (guest is in user)
    except (OSError, ValueError):
        return None
    if fields[:1] != [b"cpu"] or len(ticks) < 5:
        return None
    own = os.times()
    busy = (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")
    return time.monotonic(), busy, own.user + own.system


#: :func:`_cpu_seconds` when garaphpy was imported (``garaphpy/__init__``
#: calls :func:`start_load_sample`).
_LOAD_SAMPLE_START: list = []


def start_load_sample() -> None:
    """Note the machine's and this process's CPU time, once, as garaphpy is imported."""
    if not _LOAD_SAMPLE_START:
        _LOAD_SAMPLE_START.append(_cpu_seconds())


def other_processes_busy_cores(minimum_seconds: float) -> float | None:
    """Cores' worth of other processes' work since garaphpy was imported.

    The machine's busy CPU time less this process's own, over the time since
    :func:`start_load_sample` (waiting for ``minimum_seconds`` of it, where
    less has passed): the imports between are the sample, so that a process
    does not sleep to take one.  None where ``/proc/stat`` cannot be read or
    no sample was started.
    """
    start = _LOAD_SAMPLE_START[0] if _LOAD_SAMPLE_START else None
    now = _cpu_seconds() if start is not None else None
    if now is None:
        return None
    if now[0] - start[0] < minimum_seconds:
        time.sleep(minimum_seconds - (now[0] - start[0]))
        now = _cpu_seconds()
    elapsed = now[0] - start[0]
    return max(0.0, ((now[1] - start[1]) - (now[2] - start[2])) / elapsed)
