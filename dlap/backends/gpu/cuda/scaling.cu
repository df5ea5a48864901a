// The ε-scaling engine (dlap/hungarian/scaling.py) on the GPU: the CPU backend's kernels
// (backends/cpu/scaling.py) with the same arithmetic in the same order, so a search with one block gives
// the CPU's answer bit for bit.
//
// Price initialisation: the second-smallest row-reduced cost per column (row bands, then a
// combine), each row's regret, and the greedy assignment with its price fit (sequential by
// nature: one cluster of blocks, as a search, a cluster-wide argmin per row).
//
// Phases: every row of a phase is assigned by a single-root Dijkstra search run by one cluster of
// thread blocks (one block where clusters do not exist): cluster barriers only, no grid barrier, so
// a search's steps cost what its rows cost to scan, and the searches follow one another as on the
// CPU. (Several blocks searching for different rows at once, committing under a lock when the rows
// they found were still in place, lost: searches made against prices the other blocks were
// changing grew 6 to 60 times longer.) Counts go
// to ctl: searches in CTL_DUAL_UPDATES, rows scanned in CTL_SCANNED, infeasibility in CTL_STATUS.

#define SCALE_THREADS 1024
#ifdef DLAP_PROFILE  // clock64() per part of a search, by block 0's thread 0, added up in registers
__device__ long long dlap_profile[8];
#define PROFILE(slot) { const long long now_ = clock64(); profile_[slot] += now_ - mark_; mark_ = now_; }
#else
#define PROFILE(slot)
#endif
// SCAN_BATCH (constants.py): row entries a thread loads at once, before it uses the first

// Entries j0, j0 + stride, ... (SCAN_BATCH of them, those below n) of a row, loaded together so
// their latencies overlap (the row is read-only: through the read-only cache). A null row is a
// virtual row's: zeros.
template <typename T>
__device__ __forceinline__ void load_batch(const T* row, int j0, int stride, int n, double* c) {
#pragma unroll
    for (int b = 0; b < SCAN_BATCH; ++b) {
        const int j = j0 + b * stride;
        c[b] = row && j < n ? widen(__ldg(row + j)) : 0.0;
    }
}

// Visit this thread's entries j = threadIdx.x, j + blockDim.x, ... (below n) of a row, a batch of
// them loaded at once: visit(j, entry widened to double).
template <typename T, typename Visit>
__device__ __forceinline__ void for_each_entry(const T* row, int n, Visit visit) {
    for (int j0 = threadIdx.x; j0 < n; j0 += SCAN_BATCH * blockDim.x) {
        double c[SCAN_BATCH];
        load_batch(row, j0, blockDim.x, n, c);
#pragma unroll
        for (int b = 0; b < SCAN_BATCH; ++b) {
            const int j = j0 + b * blockDim.x;
            if (j >= n) break;
            visit(j, c[b]);
        }
    }
}

// ------------------------------------------------------------------------ clusters

// Thread block clusters (sm_90): the search kernel is templated on its cluster size; 1 is a plain
// block, and the only size instantiated where clusters do not exist.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#include <cooperative_groups.h>
#define DLAP_CLUSTER_DIMS(n) __cluster_dims__(n, 1, 1)
#else
#define DLAP_CLUSTER_DIMS(n)
#endif

// Barrier of the whole cluster (release/acquire: shared and device memory written before it are
// seen after it by every block of the cluster); a block barrier for a cluster of one.
template <int CLUSTER>
__device__ __forceinline__ void cluster_barrier() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if constexpr (CLUSTER > 1) {
        cooperative_groups::this_cluster().sync();
        return;
    }
#endif
    __syncthreads();
}

// `slot` of the cluster's block `rank` (distributed shared memory).
template <int CLUSTER, typename S>
__device__ __forceinline__ S* cluster_slot(S* slot, int rank) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if constexpr (CLUSTER > 1) return cooperative_groups::this_cluster().map_shared_rank(slot, rank);
#endif
    return slot;
}

// The entry of column j in the block that owns it, given this block's array and column offset.
template <int CLUSTER>
__device__ __forceinline__ int* cluster_column(int* local, int j, int chunk, int lo) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if constexpr (CLUSTER > 1)  // the owner's array has this block's layout, from its own column
        return cooperative_groups::this_cluster().map_shared_rank(local, j / chunk) + (j % chunk);
#endif
    return local + (j - lo);
}

// ------------------------------------------------------------------------ block reductions

// (first, second) smallest of a multiset: merge two summaries exactly (no arithmetic).
__device__ __forceinline__ void merge_two_smallest(double& a, double& b, double a2, double b2) {
    const double hi = fmax(a, a2);
    a = fmin(a, a2);
    b = fmin(hi, fmin(b, b2));
}

// Block-wide merge of (first, second) summaries; thread 0 gets the result. scratch: 64 doubles.
__device__ void block_two_smallest(double& a, double& b, double* scratch) {
    for (int o = 16; o > 0; o >>= 1) {
        const double a2 = __shfl_xor_sync(0xffffffffu, a, o), b2 = __shfl_xor_sync(0xffffffffu, b, o);
        merge_two_smallest(a, b, a2, b2);
    }
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, n_warps = (blockDim.x + 31) >> 5;
    __syncthreads();
    if (lane == 0) { scratch[warp] = a; scratch[32 + warp] = b; }
    __syncthreads();
    if (warp == 0) {
        a = lane < n_warps ? scratch[lane] : DLAP_INF;
        b = lane < n_warps ? scratch[32 + lane] : DLAP_INF;
        for (int o = 16; o > 0; o >>= 1) {
            const double a2 = __shfl_xor_sync(0xffffffffu, a, o), b2 = __shfl_xor_sync(0xffffffffu, b, o);
            merge_two_smallest(a, b, a2, b2);
        }
    }
}

// The search's order among columns at the minimum distance: a free one first (a search that can
// end does), then the lowest index: key = (assigned << 31) | j.
__device__ __forceinline__ unsigned column_key(int j, int owner) {
    return (owner >= 0 ? 0x80000000u : 0u) | static_cast<unsigned>(j);
}

// The warp's nearest (value, key), with the lane that holds it (shuffles, then redux.sync).
__device__ __forceinline__ int warp_argmin(double& value, unsigned& key) {
    const unsigned full = 0xffffffffu;
    double all = value;
    for (int o = 16; o > 0; o >>= 1) all = fmin(all, __shfl_xor_sync(full, all, o));
    const unsigned k = __reduce_min_sync(full, value == all ? key : 0xffffffffu);
    const int src = __ffs(__ballot_sync(full, value == all && key == k)) - 1;
    value = all;
    key = k;
    return src;
}

// Lexicographic minimum of (value, key) over the block, every thread gets it: each warp's, then
// the warps'. The scratch (32 doubles, 32 keys) must not be read by a previous call any more:
// every call site has a barrier between two calls.
__device__ __forceinline__ void block_argmin_key(double& value, unsigned& key, double* sv, unsigned* sk) {
    warp_argmin(value, key);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, n_warps = (blockDim.x + 31) >> 5;
    if (lane == 0) { sv[warp] = value; sk[warp] = key; }
    __syncthreads();
    value = lane < n_warps ? sv[lane] : DLAP_INF;
    key = lane < n_warps ? sk[lane] : 0xffffffffu;
    warp_argmin(value, key);
}

// ------------------------------------------------------------------------ price initialisation

// Smallest and second-smallest of C[i, j] - row_low[i] over the rows of one band, per column.
template <typename T>
__global__ void competition_bands(const T* C, int n_rows, int n_cols, const double* row_low, int band_rows,
                                  double* first, double* second) {
    const long long j = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (j >= n_cols) return;
    const int r0 = blockIdx.y * band_rows, r1 = min(n_rows, r0 + band_rows);
    double a = DLAP_INF, b = DLAP_INF;
    for (int i = r0; i < r1; ++i) {
        const double r = widen(C[static_cast<size_t>(i) * n_cols + j]) - row_low[i];
        if (r < b) {
            if (r < a) { b = a; a = r; } else { b = r; }
        }
    }
    first[static_cast<size_t>(blockIdx.y) * n_cols + j] = a;
    second[static_cast<size_t>(blockIdx.y) * n_cols + j] = b;
}

// Combine the bands: v[j] = the column's second-smallest row-reduced cost (its smallest when it
// has one finite entry, +inf when none; the host shifts the prices so that max v = 0).
extern "C" __global__ void competition_combine(const double* first, const double* second, int n_bands,
                                               int n_cols, double* v) {
    const long long j = global_thread();
    if (j >= n_cols) return;
    double a = DLAP_INF, b = DLAP_INF;
    for (int band = 0; band < n_bands; ++band)
        merge_two_smallest(a, b, first[static_cast<size_t>(band) * n_cols + j], second[static_cast<size_t>(band) * n_cols + j]);
    v[j] = b < DLAP_INF ? b : a;
}

// regret[i] = second-smallest minus smallest reduced cost of row i (one block per row).
template <typename T>
__global__ void row_regret(const T* C, int n_cols, const double* v, double* regret) {
    __shared__ double scratch[64];
    const T* row = C + static_cast<size_t>(blockIdx.x) * n_cols;
    double a = DLAP_INF, b = DLAP_INF;
    for (int j = threadIdx.x; j < n_cols; j += blockDim.x) {
        const double h = widen(row[j]) - v[j];
        if (h < b) {
            if (h < a) { b = a; a = h; } else { b = h; }
        }
    }
    block_two_smallest(a, b, scratch);
    if (threadIdx.x == 0) regret[blockIdx.x] = b < DLAP_INF ? b - a : 0.0;
}

// The greedy assignment by decreasing regret and the price fit of backends/cpu/scaling.py's greedy_prices, by one
// cluster of CLUSTER blocks (one block where clusters do not exist), each owning a slice of the
// columns as a search's blocks do. Rows in `order` each take their cheapest untaken column, first
// index on ties: each block publishes the lexicographic minimum of (reduced cost, column) over its
// slice, and after one cluster barrier every warp takes the minimum of the blocks' slots, the
// column one block scanning the whole row would take. Then (fit != 0), last row first, each row
// lowers the prices of the columns taken before it that it would rather have, each block its own
// columns, from its own column's price read in the block that owns it: one cluster barrier a row.
// A block keeps its columns' prices and taken flags in shared memory when they fit (`in_shared`,
// 12 bytes per column), else at its own columns of v_g / taken_g (taken_g zeros in). A column's
// entries are read and written by one thread of its block only (the one that visits it,
// j - lo = threadIdx.x mod blockDim.x), so a row's take needs no block barrier.
template <typename T, int CLUSTER>
__global__ void DLAP_CLUSTER_DIMS(CLUSTER) __launch_bounds__(SCALE_THREADS, 1)
greedy_prices(const T* C, int n_rows, int n_cols, double* v_g, const long long* order, int* picked,
              int* taken_g, int fit, int in_shared) {
    extern __shared__ double shared[];
    __shared__ double sv[32];
    __shared__ unsigned sk[32];
    __shared__ double slot_value[2];
    __shared__ unsigned slot_key[2];
    const int rank = CLUSTER > 1 ? static_cast<int>(blockIdx.x) : 0;  // one cluster: block = rank
    const int chunk = (n_cols + CLUSTER - 1) / CLUSTER;
    const int lo = min(n_cols, rank * chunk), width = min(n_cols, lo + chunk) - lo;
    const int lane = threadIdx.x & 31;
    double* v = in_shared ? shared : v_g + lo;
    int* taken = in_shared ? reinterpret_cast<int*>(shared + chunk) : taken_g + lo;
    auto mine = [&](int j) { return j >= lo && j < lo + width && (j - lo) % blockDim.x == threadIdx.x; };
    if (in_shared)
        for (int jl = threadIdx.x; jl < width; jl += blockDim.x) {
            v[jl] = v_g[lo + jl];
            taken[jl] = 0;
        }
    for (int q = 0; q < n_rows; ++q) {
        const T* row = C + static_cast<size_t>(order[q]) * n_cols + lo;
        double best = DLAP_INF;
        unsigned key = 0xffffffffu;
        for_each_entry(row, width, [&](int jl, double c) {
            const double h = c - v[jl];
            if (!taken[jl] && h < best) { best = h; key = lo + jl; }  // jl rises: the thread's first minimum
        });
        block_argmin_key(best, key, sv, sk);
        if (threadIdx.x == 0) {
            slot_value[q & 1] = best;
            slot_key[q & 1] = key;
        }
        cluster_barrier<CLUSTER>();  // the slots are double-buffered: one barrier a row
        best = lane < CLUSTER ? *cluster_slot<CLUSTER>(slot_value + (q & 1), lane) : DLAP_INF;
        key = lane < CLUSTER ? *cluster_slot<CLUSTER>(slot_key + (q & 1), lane) : 0xffffffffu;
        warp_argmin(best, key);
        if (best < DLAP_INF && mine(static_cast<int>(key))) taken[key - lo] = 1;
        if (rank == 0 && threadIdx.x == 0) picked[q] = best < DLAP_INF ? static_cast<int>(key) : -1;
    }
    cluster_barrier<CLUSTER>();  // the last row's pick is in picked for every block
    for (int q = n_rows - 1; fit && q >= 0; --q) {
        const int jq = __ldcg(picked + q);  // block 0's, from L2
        if (jq < 0) continue;
        if (mine(jq)) taken[jq - lo] = 0;  // the others skip jq; the next row sees it cleared
        const int owner = jq / chunk;
        const double v_q = in_shared ? *cluster_slot<CLUSTER>(shared + (jq - owner * chunk), owner) : __ldcg(v_g + jq);
        const T* row = C + static_cast<size_t>(order[q]) * n_cols;
        const double own = widen(row[jq]) - v_q;
        for_each_entry(row + lo, width, [&](int jl, double c) {
            const double h = c - v[jl];
            if (lo + jl != jq && taken[jl] && h < own) v[jl] -= own - h;
        });
        cluster_barrier<CLUSTER>();  // this row's prices are in place before the next row reads its own
    }
    cluster_barrier<CLUSTER>();  // no block leaves while another may read its shared memory
    if (in_shared)
        for (int jl = threadIdx.x; jl < width; jl += blockDim.x) v_g[lo + jl] = v[jl];
}

// The greedy start's steps on a Dask rank's column slab (dlap/distributed/rank/scaling.py), as
// backends/cpu/scaling.py's cheapest_untaken (one block: out = the smallest reduced cost of the
// row over the untaken columns, its first column or -1) and lower_taken_prices.
template <typename T>
__global__ void __launch_bounds__(SCALE_THREADS, 1)
cheapest_untaken(const T* C, int n_cols, long long row, const double* v, const bool* taken, double* out) {
    __shared__ double sv[32];
    __shared__ unsigned sk[32];
    double best = DLAP_INF;
    unsigned key = 0xffffffffu;
    for_each_entry(C + row * n_cols, n_cols, [&](int j, double c) {
        const double h = c - v[j];
        if (!taken[j] && h < best) { best = h; key = j; }  // j rises: the thread's first minimum
    });
    block_argmin_key(best, key, sv, sk);
    if (threadIdx.x == 0) {
        out[0] = best;
        out[1] = best < DLAP_INF ? static_cast<double>(key) : -1.0;
    }
}

template <typename T>
__global__ void lower_taken_prices(const T* C, int n_cols, long long row, double* v, const bool* taken, double own) {
    const long long j = global_thread();
    if (j >= n_cols || !taken[j]) return;
    const double h = widen(C[row * n_cols + j]) - v[j];
    if (h < own) v[j] -= own - h;
}

// ------------------------------------------------------------------------ one phase

// What a warp tells the cluster after each step: its nearest column (distance and key), the row
// assigned to that column (-1: free), that row's dual C[row, j] - v[j], and the row that reached
// the column (its predecessor). Double-buffered by step.
struct Slot {
    double value;
    double base;
    unsigned key;
    int row;
    int pred;
};

// Threads of a search block at most: 32 warps' slots per cluster, and registers enough to hold a
// batch of operands (a block of 1024 threads has 64 registers a thread; scan_batch needs more).
// A wide block (WIDE) first agrees within itself and publishes one slot for the cluster, so its
// size is not bound by the slots: SEARCH_WIDE_THREADS.
constexpr int search_threads(int cluster, bool wide) {
    return wide ? SEARCH_WIDE_THREADS : cluster == 1 ? 512 : 1024 / cluster;
}

// Assign the free rows rows[q], q_begin <= q < q_end, of a phase (or the virtual rows q of zero
// costs, q >= n_rows, which hold a rectangular matrix's unassigned columns), one single-root
// Dijkstra search each, from the assignment in row_match/col_match. This is the CPU's
// assign_free_rows, step for step, with its arithmetic: the same prices and assignment to the
// last bit.
//
// A search's steps are latency-bound (each scans one row, then the nearest column is chosen and
// its row scanned next), so a search is spread over a cluster of CLUSTER blocks (Hopper thread
// block clusters): block r owns the columns [r * chunk, (r + 1) * chunk) and keeps their prices,
// distances, rows, their duals, predecessors and completed flags in its shared memory (33 bytes per
// column).
// After scanning its slice, each warp publishes its nearest column in a Slot; one cluster barrier
// later every warp of every block reads the slots (at most 32: one per lane, through distributed
// shared memory) and takes the same winner, so no other barrier is needed before the next scan.
// A thread loads all its operands of a row before it uses the first, and the cost of its
// candidate column's row before the agreement. With CLUSTER = 1 the same code runs in one block.
// The blocks keep their arrays in shared memory (`in_shared`) or, for matrices too wide for it,
// in device memory, each block at its own columns (dist_g, col_u_g, closed_g, scan_pred_g,
// col_match_g from lo on). `pred` receives each completed column's predecessor
// (the augmentation follows it); done/done_dist are per block at blockIdx.x * chunk.
//
// Wide matrices (n = 40000 and more) need more threads per step than 32 warps: a row of 80000
// entries over 1024 threads is eight dependent batches of loads. With WIDE, each block first
// agrees on its own nearest column (one block barrier) and publishes one slot, so a cluster of 8
// blocks of SEARCH_WIDE_THREADS scans a row; a cluster whose slices do not fit in shared memory
// keeps them in device memory, each block at its own columns (a cluster of one block took 89 us
// per step at n = 80000 against 3.5 us for a cluster of 8 in shared memory at n = 10000).
template <typename T, int CLUSTER, bool WIDE>
__global__ void DLAP_CLUSTER_DIMS(CLUSTER) __launch_bounds__(search_threads(CLUSTER, WIDE), 1)
scaling_phase(const T* C, int n_rows, int n_cols, double* v_g, double eps, const int* rows, int q_begin,
              int q_end, int* row_match, int* col_match_g, int* extra_match, double* dist_g,
              double* col_u_g, unsigned char* closed_g, int* scan_pred_g, int* pred, int* done_all,
              double* done_dist_all, int in_shared, u64* ctl) {
    extern __shared__ double shared[];
    __shared__ double sv[32];
    __shared__ Slot slots[2][32];
    __shared__ Slot warp_slots[WIDE ? 32 : 1];  // WIDE: the block's warps, before its own slot
    __shared__ int s_n_done;
    const int tid = threadIdx.x, n_threads = blockDim.x, lane = tid & 31, warp = tid >> 5;
    // the slots the cluster agrees over: every warp's, or with WIDE every block's (<= 32, host)
    const int n_warps = (n_threads + 31) >> 5, n_slots = WIDE ? CLUSTER : CLUSTER * n_warps;
    const int rank = CLUSTER > 1 ? static_cast<int>(blockIdx.x) : 0;  // one cluster: block = rank
    const int chunk = (n_cols + CLUSTER - 1) / CLUSTER;
    const int lo = min(n_cols, rank * chunk), hi = min(n_cols, lo + chunk), width = hi - lo;
    double *v = v_g + lo, *dist = dist_g + lo, *col_u = col_u_g + lo;
    int *col_match = col_match_g + lo, *scan_pred = scan_pred_g + lo;
    unsigned char* closed = closed_g + lo;
    int* done = done_all + lo;
    double* done_dist = done_dist_all + lo;
    if (in_shared) {
        v = shared;
        dist = v + chunk;
        col_u = dist + chunk;
        col_match = reinterpret_cast<int*>(col_u + chunk);
        scan_pred = col_match + chunk;
        closed = reinterpret_cast<unsigned char*>(scan_pred + chunk);
        for (int jl = tid; jl < width; jl += n_threads) {
            v[jl] = v_g[lo + jl];
            col_match[jl] = col_match_g[lo + jl];
        }
    }
    // the dual of each column's row, C[row, j] - v[j]: what a step needs of the column it completes
    auto row_dual = [&](int jl) {
        const int owner = col_match[jl];
        return (owner >= 0 && owner < n_rows ? widen(__ldg(C + static_cast<size_t>(owner) * n_cols + lo + jl)) : 0.0) - v[jl];
    };
    for (int jl = tid; jl < width; jl += n_threads) {
        closed[jl] = 0;
        col_u[jl] = row_dual(jl);
    }
    if (tid == 0) s_n_done = 0;
    long long rows_scanned = 0, searches = 0;
    int buffer = 0;
#ifdef DLAP_PROFILE
    long long mark_ = clock64(), profile_[6] = {0, 0, 0, 0, 0, 0};
#endif
    cluster_barrier<CLUSTER>();

    // Every warp publishes its (value, key, row, base, pred) (WIDE: the block's nearest of them);
    // after the cluster barrier every warp reduces the slots to the same winner.
    auto agree = [&](double& value, unsigned& key, int& row, double& base, int& from, int cand) {
        const int src = warp_argmin(value, key);
        Slot* own = WIDE ? warp_slots : slots[buffer];
        if (lane == src) {
            const bool some = cand >= 0 && value < DLAP_INF;
            own[warp] = Slot{value, some ? col_u[cand] : 0.0, key, some ? col_match[cand] : -1,
                             some ? scan_pred[cand] : -1};
        }
        if constexpr (WIDE) {
            __syncthreads();  // the block's warps have published; warp 0 reads them before the
            if (warp == 0) {  // cluster barrier, which every warp passes before its next write
                Slot mine = lane < n_warps ? warp_slots[lane] : Slot{DLAP_INF, 0.0, 0xffffffffu, -1, -1};
                const int at = warp_argmin(mine.value, mine.key);
                if (lane == at) slots[buffer][0] = mine;
            }
        }
        cluster_barrier<CLUSTER>();
        Slot got = lane < n_slots ? *cluster_slot<CLUSTER>(&slots[buffer][WIDE ? 0 : lane % n_warps],
                                                            WIDE ? lane : lane / n_warps)
                                  : Slot{DLAP_INF, 0.0, 0xffffffffu, -1, -1};
        const int at = warp_argmin(got.value, got.key);
        value = got.value;
        key = got.key;
        row = __shfl_sync(0xffffffffu, got.row, at);
        base = __shfl_sync(0xffffffffu, got.base, at);
        from = __shfl_sync(0xffffffffu, got.pred, at);
        buffer ^= 1;
    };

    for (int q = q_begin; q < q_end; ++q) {
        const int i0 = q < n_rows ? rows[q] : q;
        double best = DLAP_INF, level = -DLAP_INF;
        unsigned key = 0xffffffffu;
        int cand = -1;  // this thread's nearest column (local index)
        if (i0 >= n_rows) {
            // a virtual root: the other virtual rows' columns are complete at its own distance
            double top = -DLAP_INF;
            for (int r = tid; r < q_end - n_rows; r += n_threads) {
                const int j = extra_match[r];
                if (j < lo || j >= hi) continue;
                const int k = atomicAdd(&s_n_done, 1);
                done[k] = j;
                done_dist[k] = -v[j - lo];
                top = fmax(top, -v[j - lo]);
                closed[j - lo] = 1;
            }
            top = -block_min(-top, sv);
            unsigned unused_key = 0;
            int unused_row, unused_from;
            double unused_base, all = -top;
            agree(all, unused_key, unused_row, unused_base, unused_from, -1);  // the cluster's largest
            level = -all;
            for (int jl = tid; jl < width; jl += n_threads) {
                scan_pred[jl] = i0;
                if (closed[jl]) { dist[jl] = DLAP_INF; continue; }
                const double x = -v[jl];
                dist[jl] = x;
                const unsigned k = column_key(lo + jl, col_match[jl]);
                if (x < best || (x == best && k < key)) { best = x; key = k; cand = jl; }
            }
        } else {
            const T* row = C + static_cast<size_t>(i0) * n_cols + lo;
            for (int j0 = tid; j0 < width; j0 += SCAN_BATCH * n_threads) {
                double c[SCAN_BATCH], vv[SCAN_BATCH];
                load_batch(row, j0, n_threads, width, c);
#pragma unroll
                for (int b = 0; b < SCAN_BATCH; ++b) vv[b] = j0 + b * n_threads < width ? v[j0 + b * n_threads] : 0.0;
#pragma unroll
                for (int b = 0; b < SCAN_BATCH; ++b) {
                    const int jl = j0 + b * n_threads;
                    if (jl >= width) break;
                    const double x = c[b] - vv[b];
                    dist[jl] = x;
                    scan_pred[jl] = i0;
                    if (x <= best) {
                        const unsigned k = column_key(lo + jl, col_match[jl]);
                        if (x < best || k < key) { best = x; key = k; cand = jl; }
                    }
                }
            }
        }
        ++rows_scanned;
        int end = -1;
        bool no_path = false;
        PROFILE(0)
        while (true) {
            int row, from;
            double base;
            agree(best, key, row, base, from, cand);
            PROFILE(4)
            if (best == DLAP_INF) {
                no_path = true;
                break;
            }
            const int j = static_cast<int>(key & 0x7fffffffu);
            level = fmax(level, best);
            if (rank == 0 && tid == 0) pred[j] = from;  // the augmentation follows it
            if (j >= lo && j < hi) {  // complete the column in its block
                if (tid == 0) {
                    const int k = s_n_done++;
                    done[k] = j;
                    done_dist[k] = best;
                }
                if ((j - lo) % n_threads == tid) {  // the thread that scans it
                    closed[j - lo] = 1;
                    dist[j - lo] = DLAP_INF;
                }
            }
            if (row < 0) {
                end = j;
                break;
            }
            // scan the row assigned to the completed column
            const double shift = level - base;
            ++rows_scanned;
            best = DLAP_INF;
            key = 0xffffffffu;
            cand = -1;
            const T* next = row < n_rows ? C + static_cast<size_t>(row) * n_cols + lo : nullptr;
            for (int j0 = tid; j0 < width; j0 += SCAN_BATCH * n_threads) {
                double c[SCAN_BATCH], vv[SCAN_BATCH], dd[SCAN_BATCH];
                unsigned char cl[SCAN_BATCH];
                load_batch(next, j0, n_threads, width, c);
#pragma unroll
                for (int b = 0; b < SCAN_BATCH; ++b) {
                    const int jl = j0 + b * n_threads;
                    const bool in = jl < width;
                    vv[b] = in ? v[jl] : 0.0;
                    dd[b] = in ? dist[jl] : DLAP_INF;
                    cl[b] = in ? closed[jl] : 1;
                }
#pragma unroll
                for (int b = 0; b < SCAN_BATCH; ++b) {
                    if (cl[b]) continue;
                    const int jl = j0 + b * n_threads;
                    const double x = next ? (c[b] - vv[b]) + shift : shift - vv[b];
                    double d = dd[b];
                    if (x < d) {
                        dist[jl] = x;
                        scan_pred[jl] = row;
                        d = x;
                    }
                    if (d <= best) {
                        const unsigned k = column_key(lo + jl, col_match[jl]);
                        if (d < best || k < key) { best = d; key = k; cand = jl; }
                    }
                }
            }
            PROFILE(1)
        }
        if (no_path) {
            if (rank == 0 && tid == 0) ctl[CTL_STATUS] = 1;
            break;
        }
        __syncthreads();  // s_n_done and this block's done list are complete
        const int n_done = s_n_done;
        if (rank == 0 && tid == 0) {  // augment: flip the path from the free column back to the root
            int j = end;
            while (true) {
                const int i = pred[j];
                // the column's owner block holds its row: in its shared memory, or in device memory
                *(in_shared ? cluster_column<CLUSTER>(col_match, j, chunk, lo) : col_match_g + j) = i;
                int after;
                if (i < n_rows) {
                    after = row_match[i];
                    row_match[i] = j;
                } else {
                    after = extra_match[i - n_rows];
                    extra_match[i - n_rows] = j;
                }
                if (i == i0) break;
                j = after;
            }
        }
        ++searches;
        cluster_barrier<CLUSTER>();  // the new assignment is in every block's column rows
        if (tid == 0) s_n_done = 0;  // every thread has read it
        // dual update (Hungarian) plus ε: every block lowers its completed columns, reopens them,
        // and renews their rows' duals (their prices, or for the path's columns their rows, changed)
        for (int k = tid; k < n_done; k += n_threads) {
            const int jl = done[k] - lo;
            double delta = level - done_dist[k];
            if (delta < eps) delta = eps;
            v[jl] -= delta;
            closed[jl] = 0;
            col_u[jl] = row_dual(jl);
        }
        __syncthreads();
        PROFILE(5)
    }
    cluster_barrier<CLUSTER>();  // no block leaves while another may read its shared memory
    if (in_shared) {
        for (int jl = tid; jl < width; jl += n_threads) {
            v_g[lo + jl] = v[jl];
            col_match_g[lo + jl] = col_match[jl];
        }
    }
    if (rank == 0 && tid == 0) {
        ctl[CTL_DUAL_UPDATES] += searches;
        ctl[CTL_SCANNED] += rows_scanned;
#ifdef DLAP_PROFILE
        for (int k = 0; k < 6; ++k) dlap_profile[k] += profile_[k];
#endif
    }
}
