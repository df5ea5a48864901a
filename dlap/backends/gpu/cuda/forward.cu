// The forward passes of both variants (Date & Nagi 2016, section 4.3.1) as persistent kernels:
// launched cooperatively (one block per multiprocessor, all resident), they loop over BFS levels
// or Dijkstra steps on the device with the grid barrier of common.cuh, so a whole search is one
// launch and one read of the control block (docs/design.md, "GPU: launches and syncs").

// Forward pass (Algorithm 3), persistent: BFS over the zero-slack graph from every free row, one
// level per barrier, until no row is left to expand. A column is claimed by the first row that
// reaches it (atomicExch: the paper's race), so the trees are vertex-disjoint (Proposition 1); a
// free column reached is marked "reverse"; an assigned one brings its row into the next level
// (contraction). col_seen marks the covered columns for the dual update.
//
// The searches are deep and narrow (about 125 levels per forward pass at uniform n = 40000, f = 10,
// most of them a handful of rows), and a grid-wide barrier costs microseconds a level. Once a level
// has at most a block's worth of rows (every block sees the same extent after the barrier), the
// other blocks leave and block 0 runs the remaining levels with the block's own barrier and the
// levels' counts in shared memory.
//
// A level's rows are shared out to groups of BFS_ROW_LANES threads, each group's threads taking a
// row's edges in turn: a row's edges (5 to 9 at n = 40000, f = 10) are then claimed at once, not
// one dependent chain of loads after another by a lone thread (4 lanes were the fastest of 1, 4 and
// 8). `first` is the thread's index, `stride` the threads taking part (a multiple of BFS_ROW_LANES).
#ifndef BFS_ROW_LANES
#define BFS_ROW_LANES 4
#endif
__device__ __forceinline__ void expand_level(const long long* row_ptr, const int* col_idx, const int* col_match,
                                             int* col_pred, int* row_pred, int* col_seen, int* rows_q,
                                             int* reverse, u64* ctl, u64* added, int head, int tail,
                                             long long first, long long stride) {
    const long long lane = first % BFS_ROW_LANES;
    for (long long q = head + first / BFS_ROW_LANES; q < tail; q += stride / BFS_ROW_LANES) {
        const int i = ld(&rows_q[q]);
        for (long long e = row_ptr[i] + lane; e < row_ptr[i + 1]; e += BFS_ROW_LANES) {
            const int j = col_idx[e];
            if (ld(&col_seen[j]) || atomicExch(&col_seen[j], 1)) continue;
            col_pred[j] = i;
            const int k = col_match[j];
            if (k < 0) {
                reverse[atomicAdd(&ctl[CTL_N_REV], 1ULL)] = j;
            } else {  // contraction: the matched row joins the next level
                row_pred[k] = j;
                rows_q[tail + static_cast<long long>(atomicAdd(added, 1ULL))] = k;
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(1024, 1)
classical_forward_pass(const long long* row_ptr, const int* col_idx, const int* col_match,
                       const int* free_rows, int n_cols, int n_resumed, int* col_pred, int* row_pred,
                       int* col_seen, int* rows_q, int* reverse, u64* ctl, unsigned int* barrier) {
    const long long tid = global_thread(), n_threads = grid_threads();
    // n_resumed > 0: the forest of the previous pass, after a dual update (section 4.4), keeps its
    // marks and is expanded again from all its rows, over the edges the update made
    const int n_roots = n_resumed ? n_resumed : static_cast<int>(ctl[CTL_N_FREE]);
    if (!n_resumed) {
        for (long long j = tid; j < n_cols; j += n_threads) col_seen[j] = 0;
        for (long long r = tid; r < n_roots; r += n_threads) {
            rows_q[r] = free_rows[r];
            row_pred[free_rows[r]] = -1;
        }
    }
    if (tid == 0) {
        ctl[CTL_N_REV] = 0;
        ctl[CTL_N_PATHS] = 0;
        ctl[CTL_ROTATE] = 0;
    }
    grid_sync(barrier);
    // Level L appends its new rows after `tail` and counts them in rotating slot L % 3; every
    // thread reads that count after the barrier, so all agree on the next level's extent (a
    // shared running total read at the top of a level would race with blocks already appending).
    int head = 0, tail = n_roots;
    long long levels = 0;
    while (head < tail && tail - head > static_cast<int>(blockDim.x)) {  // wide levels: the whole grid
        u64* added = &ctl[CTL_ROTATE + levels % 3];
        if (tid == 0) ctl[CTL_ROTATE + (levels + 1) % 3] = 0;  // last read two barriers ago
        ++levels;
        expand_level(row_ptr, col_idx, col_match, col_pred, row_pred, col_seen, rows_q, reverse, ctl, added,
                     head, tail, tid, n_threads);
        grid_sync(barrier);
        head = tail;
        tail += static_cast<int>(ld(added));
    }
    if (blockIdx.x != 0) return;  // every block saw the same extent: block 0 goes on alone
    __shared__ u64 block_added[3];  // the same rotation, in shared memory
    if (threadIdx.x < 3) block_added[threadIdx.x] = 0;
    __syncthreads();
    while (head < tail) {
        u64* added = &block_added[levels % 3];
        if (threadIdx.x == 0) block_added[(levels + 1) % 3] = 0;
        ++levels;
        expand_level(row_ptr, col_idx, col_match, col_pred, row_pred, col_seen, rows_q, reverse, ctl, added,
                     head, tail, threadIdx.x, blockDim.x);
        __syncthreads();
        head = tail;
        tail += static_cast<int>(*added);
    }
    if (tid == 0) ctl[CTL_N_Q] = tail;
    if (tid == 0) ctl[CTL_SCANNED] += levels;
}

// Tree variant (Algorithm 4 with Algorithm 9 folded in), one persistent kernel per search.
//
// The search is the CPU backend's, run level-synchronously: every free row is a root at dual
// level 0; slack[j] is the level at which column j becomes tight (relative to the start of the
// search, so the dual update inside the loop is a single comparison, the paper's update_2 applied
// lazily); at each step every column outside the forest whose slack equals the minimum joins the
// forest at once (all ties: the paper's parallel growth), and the rows matched to them become
// the next frontier. The search stops once a free column has been reached and the columns tight
// at that level are exhausted, so every tree that reaches a free column without another dual
// update contributes a path (several vertex-disjoint paths per iteration).
//
// Threads map to columns, as in the paper: a thread owns columns tid, tid + n_threads, ... and
// reads the frontier rows' entries of its columns, coalesced across the warp. Slacks are >= 0
// (clamped against rounding), so their bit patterns order like the values for atomicMin.

#define TREE_TILE 256  // frontier rows staged in shared memory at a time

__device__ __forceinline__ void atomic_min_slack(double* slot, double s) {
    atomicMin(reinterpret_cast<u64*>(slot), static_cast<u64>(__double_as_longlong(s)));
}

// Expansion, one thread per column: the owner reads every frontier row's entry of its columns.
template <typename T>
__device__ void expand_by_column(const T* C, int n_cols, const double* u, const int* rows_q,
                                 const double* row_level, int head, int tail, double* slack,
                                 int* col_pred, const double* v_open) {
    __shared__ int tile_row[TREE_TILE];
    __shared__ double tile_shift[TREE_TILE];
    const long long tid = global_thread(), n_threads = grid_threads();
    for (int q0 = head; q0 < tail; q0 += TREE_TILE) {
        const int count = min(TREE_TILE, tail - q0);
        __syncthreads();
        if (threadIdx.x < count) {
            const int i = ld(&rows_q[q0 + threadIdx.x]);
            tile_row[threadIdx.x] = i;
            tile_shift[threadIdx.x] = ld(&row_level[i]) - u[i];
        }
        __syncthreads();
        for (long long j = tid; j < n_cols; j += n_threads) {
            const double vj = ld(&v_open[j]);
            if (vj == -DLAP_INF) continue;  // a forest column
            double s = ld(&slack[j]);
            int pred = -1;
            for (int t = 0; t < count; ++t) {
                const double r = tile_shift[t] + (widen(C[static_cast<size_t>(tile_row[t]) * n_cols + j]) - vj);
                if (r < s) { s = r; pred = tile_row[t]; }
            }
            if (pred >= 0) {
                slack[j] = s > 0.0 ? s : 0.0;
                col_pred[j] = pred;
            }
        }
    }
}

// Expansion for a wide frontier (the roots of the search): `groups` threads share a column, each
// reading every groups-th frontier row; they meet in an atomicMin on the slack, then the threads
// holding the minimum record themselves as predecessor (any of equal slack is a valid one).
template <typename T>
__device__ void expand_by_group(const T* C, int n_cols, const double* u, const int* rows_q,
                                const double* row_level, int head, int tail, long long groups,
                                double* slack, int* col_pred, const double* v_open,
                                unsigned int* barrier) {
    const long long tid = global_thread();
    const long long g = tid / n_cols;
    const int j = static_cast<int>(tid % n_cols);
    double s = DLAP_INF;
    int pred = -1;
    if (g < groups) {
        const double vj = ld(&v_open[j]);
        if (vj != -DLAP_INF) {
            for (long long q = head + g; q < tail; q += groups) {
                const int i = ld(&rows_q[q]);
                const double r = (ld(&row_level[i]) - u[i]) + (widen(C[static_cast<size_t>(i) * n_cols + j]) - vj);
                if (r < s) { s = r; pred = i; }
            }
            s = s > 0.0 ? s : 0.0;
            if (pred >= 0) atomic_min_slack(&slack[j], s);
        }
    }
    grid_sync(barrier);
    if (pred >= 0 && ld(&slack[j]) == s) col_pred[j] = pred;
}

template <typename T>
__global__ void __launch_bounds__(1024, 1)
tree_forward_pass(const T* C, int n_cols, const double* u, const double* v, const int* col_match,
                  const int* free_rows, int n_roots, int collect_ties, double* slack, int* col_pred,
                  int* row_pred, double* row_level, double* col_level, double* v_open,
                  int* forest_cols, int* rows_q, int* reverse, u64* ctl, unsigned int* barrier) {
    __shared__ double scratch[32];
    const long long tid = global_thread(), n_threads = grid_threads();
    for (long long j = tid; j < n_cols; j += n_threads) {
        slack[j] = DLAP_INF;
        v_open[j] = v[j];
    }
    for (long long r = tid; r < n_roots; r += n_threads) {
        const int i = free_rows[r];
        rows_q[r] = i;
        row_level[i] = 0.0;
        row_pred[i] = -1;
    }
    if (tid == 0) {
        ctl[CTL_N_Q] = n_roots;
        ctl[CTL_N_FOREST] = 0;
        ctl[CTL_N_REV] = 0;
        ctl[CTL_N_PATHS] = 0;
        ctl[CTL_STATUS] = 0;
        for (int b = 0; b < 3; ++b) ctl[CTL_ROTATE + b] = __double_as_longlong(DLAP_INF);
    }
    grid_sync(barrier);

    int head = 0, step = 0;
    double level = 0.0;
    long long scanned = 0, updates = 0;
    while (true) {
        // Counters read here were last changed by the previous step's join; this step's join
        // comes after the barrier below, so every thread reads the same values.
        const int tail = static_cast<int>(ld(&ctl[CTL_N_Q]));
        const long long n_rev = static_cast<long long>(ld(&ctl[CTL_N_REV]));
        u64* best = &ctl[CTL_ROTATE + step % 3];
        if (tid == 0) ctl[CTL_ROTATE + (step + 1) % 3] = __double_as_longlong(DLAP_INF);
        // expansion (Algorithm 4): the rows that joined at the last step lower the slacks
        const long long wide = min(n_threads / n_cols, static_cast<long long>(tail - head) / 8);
        if (wide > 1) {
            expand_by_group(C, n_cols, u, rows_q, row_level, head, tail, wide, slack, col_pred, v_open, barrier);
        } else {
            expand_by_column(C, n_cols, u, rows_q, row_level, head, tail, slack, col_pred, v_open);
        }
        scanned += tail - head;
        head = tail;
        double low = DLAP_INF;
        for (long long j = tid; j < n_cols; j += n_threads) low = fmin(low, ld(&slack[j]));
        low = block_min(low, scratch);
        if (threadIdx.x == 0 && low < DLAP_INF) atomicMin(best, static_cast<u64>(__double_as_longlong(low)));
        grid_sync(barrier);

        const double delta = __longlong_as_double(static_cast<long long>(ld(best)));
        if (n_rev > 0 && delta > level) break;  // the level where paths were found is exhausted
        if (!(delta < DLAP_INF)) {              // no finite edge leaves the forest
            if (tid == 0) ctl[CTL_STATUS] = 1;
            break;
        }
        if (delta > level) {  // dual update by theta = delta - level (Algorithm 9)
            level = delta;
            ++updates;
        }
        // the columns tight at this level join the forest (they are covered)
        for (long long j = tid; j < n_cols; j += n_threads) {
            if (ld(&slack[j]) != delta) continue;
            col_level[j] = delta;
            slack[j] = DLAP_INF;
            v_open[j] = -DLAP_INF;
            forest_cols[atomicAdd(&ctl[CTL_N_FOREST], 1ULL)] = static_cast<int>(j);
            const int k = col_match[j];
            if (k < 0) {
                reverse[atomicAdd(&ctl[CTL_N_REV], 1ULL)] = static_cast<int>(j);
            } else {  // its row joins the frontier at the column's level
                row_level[k] = delta;
                row_pred[k] = static_cast<int>(j);
                rows_q[atomicAdd(&ctl[CTL_N_Q], 1ULL)] = k;
            }
        }
        grid_sync(barrier);
        ++step;
        if (!collect_ties && ld(&ctl[CTL_N_REV]) > 0) break;
        if (step > n_cols + 1) {  // every step covers a column: more steps is an internal error
            if (tid == 0) ctl[CTL_STATUS] = 2;
            break;
        }
    }
    if (tid == 0) {
        ctl[CTL_LEVEL] = __double_as_longlong(level);
        ctl[CTL_DUAL_UPDATES] += updates;
        ctl[CTL_SCANNED] += scanned;
    }
}

// The Dask engine's tree search over column slabs (Algorithm 4 across the ranks, section 5): the
// two halves of a wave's exchange, so that a wave costs two launches and two reads of a few
// scalars, not a chain of array steps.
//
// tree_offer, persistent: this rank's offer for the all-gather. out row 0 is (its smallest slack,
// the number of columns offered, 0); rows 1.. are (global column, predecessor row, slack) of its
// columns with a finite slack at or below max(level, that smallest slack), in no fixed order
// (every rank receives the same rows, so the replicas agree). ctl[CTL_OFFER_LOW] must hold
// ordered(+inf) and ctl[CTL_OFFER_COUNT] 0 at launch; the kernel leaves them so.
extern "C" __global__ void __launch_bounds__(1024, 1)
tree_offer(const double* slack, const int* col_pred, int n_cols, int lo, double level, double* out,
           u64* ctl, unsigned int* barrier) {
    __shared__ double mins[32];
    const long long tid = global_thread(), n_threads = grid_threads();
    double low = DLAP_INF;
    for (long long j = tid; j < n_cols; j += n_threads) low = fmin(low, slack[j]);
    low = block_min(low, mins);
    if (threadIdx.x == 0 && low < DLAP_INF) atomicMin(&ctl[CTL_OFFER_LOW], ordered(low));
    grid_sync(barrier);
    low = unordered(ld(ctl + CTL_OFFER_LOW));
    const double bound = fmax(low, level);
    for (long long j = tid; j < n_cols; j += n_threads) {
        const double s = slack[j];
        if (s <= bound && s < DLAP_INF) {
            const long long k = static_cast<long long>(atomicAdd(&ctl[CTL_OFFER_COUNT], 1ULL)) + 1;
            out[3 * k] = static_cast<double>(j + lo);
            out[3 * k + 1] = static_cast<double>(col_pred[j]);
            out[3 * k + 2] = s;
        }
    }
    grid_sync(barrier);
    if (tid == 0) {
        out[0] = low;
        out[1] = static_cast<double>(ld(ctl + CTL_OFFER_COUNT));
        out[2] = 0.0;
        ctl[CTL_OFFER_LOW] = ordered(DLAP_INF);
        ctl[CTL_OFFER_COUNT] = 0;
    }
}

// Exclusive prefix sum over the block; every thread gets its own and the block's total.
// `scratch` holds 32 long longs of shared memory.
__device__ __forceinline__ long long block_exclusive_sum(long long x, long long* scratch, long long* total) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, n_warps = (blockDim.x + 31) >> 5;
    long long inclusive = x;
    for (int o = 1; o < 32; o <<= 1) {
        const long long y = __shfl_up_sync(0xffffffffu, inclusive, o);
        if (lane >= o) inclusive += y;
    }
    __syncthreads();  // scratch may still be read by a previous call
    if (lane == 31) scratch[warp] = inclusive;
    __syncthreads();
    long long before = 0, sum = 0;
    for (int w = 0; w < n_warps; ++w) {
        if (w < warp) before += scratch[w];
        sum += scratch[w];
    }
    *total = sum;
    return before + inclusive - x;
}

// tree_join, one block: the offered rows `offered[0..n)` (one rank's piece of the all-gather, in
// rank order) that are tight at `level` join the forest on every rank's replica, in the order
// given: a column gets its predecessor and level and joins forest_cols; a free one is marked
// "reverse"; the row matched to any other joins rows_q at that level and is the next wave's
// frontier, with shift[f] = level joined - u. This rank's own tight columns leave its slab's scan
// (slack +inf, v_open -inf). wave = [columns in the forest, reverse columns, rows in the forest,
// frontier rows so far in this wave]; `first` starts a wave's frontier.
extern "C" __global__ void __launch_bounds__(1024, 1)
tree_join(const double* offered, int n, double level, int lo, int hi, double* slab_slack, double* slab_v_open,
          int* col_pred, double* col_level, int* forest_cols, const int* col_match, int* reverse,
          double* row_level, int* row_pred, int* rows_q, const double* u, double* shift, long long* wave,
          int first) {
    __shared__ long long sums[32];
    long long n_forest = wave[0], n_rev = wave[1], n_q = wave[2], n_front = first ? 0 : wave[3];
    for (int base = 0; base < n; base += blockDim.x) {
        const int k = base + threadIdx.x;
        int j = -1, owner = -1;
        double s = DLAP_INF;
        if (k < n) {
            s = offered[3 * k + 2];
            if (s <= level) {
                j = static_cast<int>(offered[3 * k]);
                owner = col_match[j];
            }
        }
        // free columns counted in the high half, the others' rows in the low half
        const long long flags = j < 0 ? 0 : (owner < 0 ? (1LL << 32) : 1LL);
        long long total;
        const long long before = block_exclusive_sum(flags, sums, &total);
        if (j >= 0) {
            const long long free_before = before >> 32, rows_before = before & 0xffffffffLL;
            if (j >= lo && j < hi) {
                slab_slack[j - lo] = DLAP_INF;
                slab_v_open[j - lo] = -DLAP_INF;
            }
            col_pred[j] = static_cast<int>(offered[3 * k + 1]);
            col_level[j] = s;
            forest_cols[n_forest + free_before + rows_before] = j;
            if (owner < 0) {
                reverse[n_rev + free_before] = j;
            } else {
                rows_q[n_q + rows_before] = owner;
                row_level[owner] = s;
                row_pred[owner] = j;
                shift[n_front + rows_before] = s - u[owner];
            }
        }
        const long long n_free = total >> 32, n_rows = total & 0xffffffffLL;
        n_forest += n_free + n_rows;
        n_rev += n_free;
        n_q += n_rows;
        n_front += n_rows;
    }
    if (threadIdx.x == 0) {
        wave[0] = n_forest;
        wave[1] = n_rev;
        wave[2] = n_q;
        wave[3] = n_front;
    }
}

// One step of an ε-scaling search over a column slab (the Dask engine's searches across the
// ranks, dlap/distributed/rank/scaling.py), persistent: row `row` (unless -1) lowers dist to
// (C[row] - v_open) + shift, recording it in pred; then offer = (the smallest distance, the first
// free column at it, else the first column at it, 1.0 if that column is free under match, the
// reduced cost C[match[j], j] - v[j] of its row there, its predecessor), as the CPU kernel's
// search_offer (backends/cpu/scaling.py) computes it. One launch, where the array version took a dozen
// steps with host reads. ctl[CTL_OFFER_LOW] must hold ordered(+inf), CTL_OFFER_COUNT and
// CTL_OFFER_FREE 0 at launch; the kernel leaves them so.
template <typename T>
__global__ void __launch_bounds__(1024, 1)
search_offer(const T* C, int n_cols, const double* v, const double* v_open, double* dist, int* pred,
             const int* match, int row, double shift, double* offer, u64* ctl, unsigned int* barrier) {
    __shared__ double mins[32];
    const long long tid = global_thread(), n_threads = grid_threads();
    double low = DLAP_INF;
    for (long long j = tid; j < n_cols; j += n_threads) {
        double d = dist[j];
        if (row >= 0) {
            const double x = (widen(C[static_cast<size_t>(row) * n_cols + j]) - v_open[j]) + shift;
            if (x < d) {
                d = x;
                dist[j] = x;
                pred[j] = row;
            }
        }
        low = fmin(low, d);
    }
    low = block_min(low, mins);
    if (threadIdx.x == 0 && low < DLAP_INF) atomicMin(&ctl[CTL_OFFER_LOW], ordered(low));
    grid_sync(barrier);
    const double best = unordered(ld(ctl + CTL_OFFER_LOW));
    if (best < DLAP_INF) {
        for (long long j = tid; j < n_cols; j += n_threads) {
            if (dist[j] == best) {  // this thread's own write above
                const u64 key = static_cast<u64>(n_cols - j);  // the largest key is the first column
                atomicMax(&ctl[CTL_OFFER_COUNT], key);
                if (match[j] < 0) atomicMax(&ctl[CTL_OFFER_FREE], key);
            }
        }
    }
    grid_sync(barrier);
    if (tid == 0) {
        offer[0] = best;
        offer[1] = -1.0;
        offer[2] = 0.0;
        offer[3] = 0.0;
        offer[4] = -1.0;
        if (best < DLAP_INF) {
            const u64 free_key = ld(ctl + CTL_OFFER_FREE);
            const int j = n_cols - static_cast<int>(free_key ? free_key : ld(ctl + CTL_OFFER_COUNT));
            const int i = match[j];
            offer[1] = static_cast<double>(j);
            offer[2] = i < 0 ? 1.0 : 0.0;
            offer[3] = i >= 0 ? widen(C[static_cast<size_t>(i) * n_cols + j]) - v[j] : 0.0;
            offer[4] = static_cast<double>(ld(pred + j));
        }
        ctl[CTL_OFFER_LOW] = ordered(DLAP_INF);
        ctl[CTL_OFFER_COUNT] = 0;
        ctl[CTL_OFFER_FREE] = 0;
    }
}
