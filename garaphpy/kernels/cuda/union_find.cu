// garaphpy's connected components on the device: a sampled union-find
// (Afforest: Sutton, Ben-Nun and Barak, IPDPS 2018; hooking as in ECL-CC,
// Jaiganesh and Burtscher, HPDC 2018), the GPU's start of min-label
// propagation. Compiled on its own by garaphpy/kernels/gpu_union_find.py,
// after a prelude that defines vid_t (the store's vertex ids, int or long
// long) and value_t (the program's labels); driven by
// garaphpy/scheduler/gpu/union_find_start.py.
//
// The graph is the resident CSC of a symmetric graph: the in-edges of v are
// sources[in_offsets[v] .. in_offsets[v + 1]), the same as its out-edges.
// parent[v] <= v always: a root is hooked only under a smaller root, so a
// tree's root is its smallest vertex, and once every edge is linked the root
// of a component is its smallest internal id.
//   gp_uf_init          parent[v] = v;
//   gp_uf_link_round    every vertex links along its in-edge number `round`
//                       (those that have one);
//   gp_uf_compress      every vertex points at its tree's root;
//   gp_uf_largest       one block: the root held most often by GP_UF_SAMPLE
//                       evenly spaced vertices (ties: the smaller root), the
//                       largest component in all likelihood;
//   gp_uf_link_rest     the vertices outside that root's tree link along their
//                       remaining in-edges (an edge from inside the tree to a
//                       vertex outside is linked from that vertex's side);
//                       a warp shares the edges of its vertices with many;
//   gp_uf_labels        every vertex takes its root's user id as its label.

#define GP_UF_SAMPLE 1024
// remaining in-edges above which a vertex's edges are shared by its warp
#define GP_UF_WIDE 32

__device__ __forceinline__ vid_t gp_uf_read(const vid_t* parent, long long v) {
    return *((const volatile vid_t*)(parent + v));
}

// parent[high] = low where it still holds high; whether it did
__device__ __forceinline__ bool gp_uf_hook(vid_t* parent, vid_t high, vid_t low) {
    if (sizeof(vid_t) == 4)
        return atomicCAS((int*)(parent + high), (int)high, (int)low) == (int)high;
    return atomicCAS((unsigned long long*)(parent + high), (unsigned long long)high,
                     (unsigned long long)low) == (unsigned long long)high;
}

// Unite the trees of u and v: the larger root hooked under the smaller
// (Afforest's Link; safe while other threads link).
__device__ void gp_uf_link(vid_t u, vid_t v, vid_t* parent) {
    vid_t p1 = gp_uf_read(parent, u);
    vid_t p2 = gp_uf_read(parent, v);
    while (p1 != p2) {
        const vid_t high = p1 > p2 ? p1 : p2;
        const vid_t low = p1 > p2 ? p2 : p1;
        const vid_t high_parent = gp_uf_read(parent, high);
        if (high_parent == low) return;
        if (high_parent == high && gp_uf_hook(parent, high, low)) return;
        p1 = gp_uf_read(parent, gp_uf_read(parent, high));
        p2 = gp_uf_read(parent, low);
    }
}

__device__ __forceinline__ vid_t gp_uf_root(const vid_t* parent, vid_t v) {
    vid_t p = parent[v];
    while (true) {
        const vid_t up = parent[p];
        if (up == p) return p;
        p = up;
    }
}

extern "C" __global__ void gp_uf_init(vid_t* __restrict__ parent, long long num_vertices) {
    for (long long v = blockIdx.x * (long long)blockDim.x + threadIdx.x; v < num_vertices;
         v += (long long)gridDim.x * blockDim.x)
        parent[v] = (vid_t)v;
}

extern "C" __global__ void gp_uf_link_round(const long long* __restrict__ in_offsets,
                                            const vid_t* __restrict__ sources, vid_t* parent,
                                            long long num_vertices, int round) {
    for (long long v = blockIdx.x * (long long)blockDim.x + threadIdx.x; v < num_vertices;
         v += (long long)gridDim.x * blockDim.x) {
        const long long e = in_offsets[v] + round;
        if (e < in_offsets[v + 1]) gp_uf_link((vid_t)v, sources[e], parent);
    }
}

// No vertex links meanwhile: a pointer read on the way is always an ancestor.
extern "C" __global__ void gp_uf_compress(vid_t* parent, long long num_vertices) {
    for (long long v = blockIdx.x * (long long)blockDim.x + threadIdx.x; v < num_vertices;
         v += (long long)gridDim.x * blockDim.x)
        parent[v] = gp_uf_root(parent, (vid_t)v);
}

// One block of GP_UF_SAMPLE threads, after a compression (every parent a root).
extern "C" __global__ void gp_uf_largest(const vid_t* __restrict__ parent,
                                         long long num_vertices, long long* largest) {
    __shared__ vid_t sample[GP_UF_SAMPLE];
    __shared__ int best_count[GP_UF_SAMPLE];
    __shared__ vid_t best_root[GP_UF_SAMPLE];
    const int count = num_vertices < GP_UF_SAMPLE ? (int)num_vertices : GP_UF_SAMPLE;
    const int i = threadIdx.x;
    if (i < count) sample[i] = parent[(long long)i * num_vertices / count];
    __syncthreads();
    int matches = 0;
    vid_t root = 0;
    if (i < count) {
        root = sample[i];
        for (int j = 0; j < count; ++j) matches += sample[j] == root;
    }
    best_count[i] = matches;
    best_root[i] = root;
    __syncthreads();
    for (int stride = GP_UF_SAMPLE / 2; stride > 0; stride >>= 1) {
        if (i < stride) {
            const int other = i + stride;
            if (best_count[other] > best_count[i] ||
                (best_count[other] == best_count[i] && best_count[other] > 0 &&
                 best_root[other] < best_root[i])) {
                best_count[i] = best_count[other];
                best_root[i] = best_root[other];
            }
        }
        __syncthreads();
    }
    if (i == 0) largest[0] = count ? (long long)best_root[0] : -1;
}

// Lanes whose vertex has few remaining in-edges link them alone; then the warp
// takes the edges of each of its vertices with many, 32 at a time.
extern "C" __global__ void gp_uf_link_rest(const long long* __restrict__ in_offsets,
                                           const vid_t* __restrict__ sources, vid_t* parent,
                                           long long num_vertices, int first,
                                           const long long* __restrict__ largest) {
    const long long skip = largest[0];
    const int lane = threadIdx.x & 31;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long base = blockIdx.x * (long long)blockDim.x + (threadIdx.x & ~31);
         base < num_vertices; base += stride) {
        const long long v = base + lane;
        long long begin = 0, end = 0;
        if (v < num_vertices && (long long)gp_uf_read(parent, v) != skip) {
            begin = in_offsets[v] + first;
            end = in_offsets[v + 1];
        }
        const bool wide = end - begin > GP_UF_WIDE;
        if (!wide)
            for (long long e = begin; e < end; ++e) gp_uf_link((vid_t)v, sources[e], parent);
        unsigned wide_lanes = __ballot_sync(0xffffffffu, wide);
        while (wide_lanes) {
            const int owner = __ffs(wide_lanes) - 1;
            wide_lanes &= wide_lanes - 1;
            const long long u = __shfl_sync(0xffffffffu, v, owner);
            const long long from = __shfl_sync(0xffffffffu, begin, owner);
            const long long to = __shfl_sync(0xffffffffu, end, owner);
            for (long long e = from + lane; e < to; e += 32)
                gp_uf_link((vid_t)u, sources[e], parent);
        }
    }
}

// ids: the user ids, increasing (dense: consecutive, ids[0] alone read).
// next: the second buffer of a synchronous run (or values again). A vertex whose
// label dropped is counted.
extern "C" __global__ void gp_uf_labels(const vid_t* __restrict__ parent,
                                        const long long* __restrict__ ids, int dense,
                                        value_t* values, value_t* next,
                                        long long num_vertices,
                                        unsigned long long* dropped_total) {
    unsigned long long dropped = 0;
    for (long long v = blockIdx.x * (long long)blockDim.x + threadIdx.x; v < num_vertices;
         v += (long long)gridDim.x * blockDim.x) {
        const long long root = (long long)gp_uf_root(parent, (vid_t)v);
        const value_t label = (value_t)(dense ? ids[0] + root : ids[root]);
        dropped += label < values[v];
        values[v] = label;
        next[v] = label;
    }
    for (int offset = 16; offset > 0; offset >>= 1)
        dropped += __shfl_down_sync(0xffffffffu, dropped, offset);
    if ((threadIdx.x & 31) == 0 && dropped) atomicAdd(dropped_total, dropped);
}
