// The GPU's decoder of compressed pages (garaphpy/storage/page_codec.py,
// format gap-bp128), compiled on its own by garaphpy/kernels/gpu_codec.py:
// a compressed page copied to the device is expanded, on the copy's stream,
// into the plain page the pull kernels read (its source ids and IdxOff; the
// edge values are stored as they are and copied).
//
// One warp decodes one block of GP_BLOCK_EDGES (128) edges, four consecutive
// edges a lane.  A lane finds its first edge's destination in the CSC index
// (in_offsets, on the device for the run) and walks on from there; an edge is
// a head when it is the block's first or its destination's first, a gap
// otherwise.  A warp scan of the lanes' head counts places every value in the
// block's two bit-packed runs, and a segmented warp scan of the values (a head
// restarts the sum) gives each source.  A block whose words contradict the
// stream or the CSC index is left undecoded and counted in errors[0].

#ifndef GP_BLOCK_EDGES
#define GP_BLOCK_EDGES 128
#endif
#define GP_CODEC_LANE_EDGES (GP_BLOCK_EDGES / 32)
static_assert(GP_CODEC_LANE_EDGES == 4, "a lane decodes four edges (one vector store)");

// The largest vertex in [lo, hi) whose in-edges start at or before edge (a
// zero-degree vertex before it shares its offset).
template <typename OFFSET>
__device__ __forceinline__ long long gp_codec_vertex_of(const OFFSET* __restrict__ in_offsets,
                                                        long long lo, long long hi,
                                                        long long edge) {
    hi -= 1;
    while (lo < hi) {
        const long long mid = (lo + hi + 1) >> 1;
        if ((long long)in_offsets[mid] <= edge) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

// The last shard in [lo, hi) whose edges start at or before edge (page-relative).
__device__ __forceinline__ int gp_codec_shard_of(const long long* __restrict__ shard_edge_begin,
                                                 int lo, int hi, long long edge) {
    hi -= 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) >> 1;
        if (shard_edge_begin[mid] <= edge) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

// width bits at bit position of the stream (a value never spans more than two
// words; the stream ends with a zero word, so the second word of a value of
// some width always exists; a value of no width may sit at the very end).
__device__ __forceinline__ unsigned long long gp_codec_bits(const unsigned int* __restrict__ stream,
                                                            long long position, int width) {
    if (width == 0) return 0ull;
    const long long word = position >> 5;
    const unsigned long long pair = (unsigned long long)__ldg(stream + word)
                                    | ((unsigned long long)__ldg(stream + word + 1) << 32);
    const unsigned long long mask = width >= 64 ? ~0ull : ((1ull << width) - 1ull);
    return (pair >> (position & 31)) & mask;
}

// Four consecutive values from an index that is a multiple of four, in one
// vector store (the page buffer's arrays start 64-byte aligned).
template <typename T>
__device__ __forceinline__ void gp_codec_store(T* __restrict__ at, const T (&values)[4]) {
    if constexpr (sizeof(T) == 2) {
        ushort4 v;
        v.x = values[0]; v.y = values[1]; v.z = values[2]; v.w = values[3];
        *reinterpret_cast<ushort4*>(at) = v;
    } else if constexpr (sizeof(T) == 4) {
        *reinterpret_cast<int4*>(at) = make_int4((int)values[0], (int)values[1],
                                                 (int)values[2], (int)values[3]);
    } else {
        reinterpret_cast<longlong2*>(at)[0] = make_longlong2(values[0], values[1]);
        reinterpret_cast<longlong2*>(at)[1] = make_longlong2(values[2], values[3]);
    }
}

// stream: the page's edge stream (stream_words words, its block table checked
// by the host).  in_offsets: the whole graph's CSC index.  The page holds
// edges edge_begin .. edge_begin + num_edges - 1, destinations first_vertex ..
// end_vertex - 1, shards first_shard .. first_shard + num_shards - 1 with
// shard_edge_begin relative to the page's first edge.  Decodes the blocks
// first_block .. end_block - 1 of the page into sources and idxoff (idxoff may
// be null), each from the first edge of block first_block on.
template <typename VID, typename OFFSET>
__global__ void __launch_bounds__(256)
gp_decode_gap_bp128(const unsigned int* __restrict__ stream, long long stream_words,
                    const OFFSET* __restrict__ in_offsets, long long edge_begin,
                    long long num_edges, long long first_vertex, long long end_vertex,
                    const long long* __restrict__ shard_first_vertex,
                    const long long* __restrict__ shard_edge_begin, int first_shard,
                    int num_shards, long long first_block, long long end_block,
                    VID* __restrict__ sources,
                    unsigned short* __restrict__ idxoff, unsigned int* errors) {
    const int lane = threadIdx.x & 31;
    const long long num_blocks = min((num_edges + GP_BLOCK_EDGES - 1) / GP_BLOCK_EDGES,
                                     end_block);
    const long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
    for (long long block = first_block + (((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5);
         block < num_blocks; block += warps) {
        const long long first = block * GP_BLOCK_EDGES;         // page-relative
        const long long at = first - first_block * GP_BLOCK_EDGES;      // in the outputs
        const int count = (int)min((long long)GP_BLOCK_EDGES, num_edges - first);
        const long long base = __ldg(stream + 1 + block), end = __ldg(stream + 2 + block);
        if (base >= end || end >= stream_words) {
            if (lane == 0) atomicAdd(errors, 1u);
            continue;
        }
        const unsigned int header = __ldg(stream + base);
        const int head_width = header & 0xFF, gap_width = (header >> 8) & 0xFF;
        const int heads = (int)(header >> 16);
        // the block's destinations lie between those of its first and last edges (two
        // lanes search the page's; every lane then searches only theirs)
        long long bound = 0;
        if (lane == 0)
            bound = gp_codec_vertex_of(in_offsets, first_vertex, end_vertex,
                                       edge_begin + first);
        else if (lane == 1)
            bound = gp_codec_vertex_of(in_offsets, first_vertex, end_vertex,
                                       edge_begin + first + count - 1) + 1;
        const long long block_first_vertex = __shfl_sync(0xffffffffu, bound, 0);
        const long long block_end_vertex = __shfl_sync(0xffffffffu, bound, 1);
        // this lane's edges: heads or gaps, and their destinations
        const int i0 = lane * GP_CODEC_LANE_EDGES;
        long long vertex[GP_CODEC_LANE_EDGES];
        unsigned int head_flags = 0;
        int lane_heads = 0;
        if (i0 < count) {
            const long long e0 = edge_begin + first + i0;
            long long v = gp_codec_vertex_of(in_offsets, block_first_vertex, block_end_vertex,
                                             e0);
#pragma unroll
            for (int j = 0; j < GP_CODEC_LANE_EDGES; ++j) {
                const long long e = e0 + j;
                if (i0 + j >= count) break;
                while (v + 1 < block_end_vertex && (long long)__ldg(in_offsets + v + 1) <= e)
                    ++v;
                vertex[j] = v;
                if (i0 + j == 0 || e == (long long)__ldg(in_offsets + v)) {
                    head_flags |= 1u << j;
                    ++lane_heads;
                }
            }
        }
        // the heads before this lane (a warp scan), and in the whole block
        int heads_through = lane_heads;
#pragma unroll
        for (int offset = 1; offset < 32; offset <<= 1) {
            const int other = __shfl_up_sync(0xffffffffu, heads_through, offset);
            if (lane >= offset) heads_through += other;
        }
        const int block_heads = __shfl_sync(0xffffffffu, heads_through, 31);
        const long long bits = (long long)heads * head_width
                               + (long long)(count - heads) * gap_width;
        if (head_width > 32 || gap_width > 32 || block_heads != heads
                || 1 + (bits + 31) / 32 > end - base) {
            if (lane == 0) atomicAdd(errors, 1u);
            continue;
        }
        const long long head_at = (base + 1) * 32;
        const long long gap_at = head_at + (long long)heads * head_width;
        // each edge's value (a head's source, a gap), then the lane's segmented sums
        long long value[GP_CODEC_LANE_EDGES];
        long long sum = 0;
        bool restarted = false;
        int heads_before = heads_through - lane_heads;
#pragma unroll
        for (int j = 0; j < GP_CODEC_LANE_EDGES; ++j) {
            if (i0 + j >= count) break;
            const int i = i0 + j;
            if (head_flags & (1u << j)) {
                const long long z = (long long)gp_codec_bits(
                    stream, head_at + (long long)heads_before * head_width, head_width);
                value[j] = ((z >> 1) ^ -(z & 1)) + vertex[j];
                sum = value[j];
                restarted = true;
                ++heads_before;
            } else {
                value[j] = (long long)gp_codec_bits(
                    stream, gap_at + (long long)(i - heads_before) * gap_width, gap_width);
                sum += value[j];
            }
        }
        // the source before this lane's first edge: a segmented scan over the lanes
        long long carry = sum;
        bool carry_restarted = restarted;
#pragma unroll
        for (int offset = 1; offset < 32; offset <<= 1) {
            const long long other = __shfl_up_sync(0xffffffffu, carry, offset);
            const bool other_restarted = __shfl_up_sync(0xffffffffu, (int)carry_restarted,
                                                        offset) != 0;
            if (lane >= offset && !carry_restarted) {
                carry += other;
                carry_restarted = other_restarted;
            }
        }
        long long previous = __shfl_up_sync(0xffffffffu, carry, 1);
        VID out[GP_CODEC_LANE_EDGES];
#pragma unroll
        for (int j = 0; j < GP_CODEC_LANE_EDGES; ++j) {
            if (i0 + j >= count) break;
            previous = (head_flags & (1u << j)) ? value[j] : previous + value[j];
            out[j] = (VID)previous;
        }
        const bool whole = i0 + GP_CODEC_LANE_EDGES <= count;
        if (whole) gp_codec_store(sources + at + i0, out);
        else {
#pragma unroll
            for (int j = 0; j < GP_CODEC_LANE_EDGES; ++j)
                if (i0 + j < count) sources[at + i0 + j] = out[j];
        }
        if (idxoff == nullptr) continue;
        // each edge's shard: the block's lie between those of its first and last edges
        int shard_bound = 0;
        if (lane == 0)
            shard_bound = gp_codec_shard_of(shard_edge_begin, first_shard,
                                            first_shard + num_shards, first);
        else if (lane == 1)
            shard_bound = gp_codec_shard_of(shard_edge_begin, first_shard,
                                            first_shard + num_shards, first + count - 1) + 1;
        const int block_first_shard = __shfl_sync(0xffffffffu, shard_bound, 0);
        const int block_end_shard = __shfl_sync(0xffffffffu, shard_bound, 1);
        if (i0 >= count) continue;
        int shard = gp_codec_shard_of(shard_edge_begin, block_first_shard, block_end_shard,
                                      first + i0);
        unsigned short offsets[GP_CODEC_LANE_EDGES];
#pragma unroll
        for (int j = 0; j < GP_CODEC_LANE_EDGES; ++j) {
            if (i0 + j >= count) break;
            const long long i = first + i0 + j;
            while (shard + 1 < block_end_shard && __ldg(shard_edge_begin + shard + 1) <= i)
                ++shard;
            offsets[j] = (unsigned short)(vertex[j] - __ldg(shard_first_vertex + shard));
        }
        if (whole) gp_codec_store(idxoff + at + i0, offsets);
        else {
#pragma unroll
            for (int j = 0; j < GP_CODEC_LANE_EDGES; ++j)
                if (i0 + j < count) idxoff[at + i0 + j] = offsets[j];
        }
    }
}
