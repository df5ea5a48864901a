// The classical (Munkres) variant of Date & Nagi (2016): zero-slack compression (section 3.3) and
// the two-stage dual update (4.4, Algorithms 7 and 8). Its forward pass is in forward.cu.

// Row entries a thread of the compression loads at once before it uses the first (a row scan with
// one load in flight is a chain of dependent loads; 4 was the fastest of 1, 4 and 8).
#ifndef CLASSICAL_BATCH
#define CLASSICAL_BATCH 4
#endif
// Zero-slack edges a row keeps in shared memory during the compression's one pass over the matrix;
// a row with more is scanned again after the prefix sum (compress_fill)
#define COMPRESS_ROW_EDGES 1024

// visit(r, j, C[i][j], v[j]) for each of the ROWS rows `rows` (rows[r] = C + i * n_cols) and each
// column j this thread takes (threadIdx.x, then every blockDim.x) whose entry is finite, BATCH
// columns at a time; columns `skip` marks (col_seen; nullptr: none) are not read. The rows share
// each column's loads of v[j] and skip[j]: ROWS rows a block cost one read of those, not ROWS.
template <int BATCH, int ROWS, typename T, typename F>
__device__ __forceinline__ void scan_rows(const T* const (&rows)[ROWS], int n_cols, const double* v, const int* skip,
                                          F&& visit) {
    for (int j0 = threadIdx.x; j0 < n_cols; j0 += BATCH * blockDim.x) {
        double c[BATCH][ROWS], vv[BATCH];
#pragma unroll
        for (int b = 0; b < BATCH; ++b) {
            const int j = j0 + b * blockDim.x;
            const bool in = j < n_cols && !(skip && skip[j]);
            vv[b] = in ? v[j] : 0.0;
#pragma unroll
            for (int r = 0; r < ROWS; ++r) c[b][r] = in ? widen(rows[r][j]) : DLAP_INF;
        }
#pragma unroll
        for (int b = 0; b < BATCH; ++b)
#pragma unroll
            for (int r = 0; r < ROWS; ++r)
                if (c[b][r] < DLAP_INF) visit(r, j0 + b * blockDim.x, c[b][r], vv[b]);
    }
}

// scan_rows of one row: visit(j, C[i][j], v[j]).
template <int BATCH, typename T, typename F>
__device__ __forceinline__ void scan_row(const T* row, int n_cols, const double* v, const int* skip, F&& visit) {
    const T* const rows[1] = {row};
    scan_rows<BATCH, 1>(rows, n_cols, v, skip, [&](int, int j, double c, double vj) { visit(j, c, vj); });
}

// How the compression makes a row's edges (KEEP_UNCOVERED, KEEP_ROW, SCAN_ROW: constants.py): scan
// the row of the matrix, keep the row's previous edges, or keep those of them to uncovered columns.
// The first compression scans every row; the one after a dual update (4.4) scans only the forest
// rows that can have gained an edge and takes the others from the previous CSR
// (base.compression_plan).

// visit(j) for each zero-slack column j of row i, made as `how` says; the block's threads share
// the work (columns or previous edges).
template <typename T, typename F>
__device__ __forceinline__ void row_edges(const T* C, int i, int n_cols, const double* u, const double* v,
                                          double tol_scale, signed char how, const long long* old_ptr,
                                          const int* old_idx, const int* col_seen, F&& visit) {
    if (how == SCAN_ROW) {
        const double ui = u[i];
        scan_row<CLASSICAL_BATCH>(C + static_cast<size_t>(i) * n_cols, n_cols, v, nullptr, [&](int j, double c, double vj) {
            if (zero_slack(c, ui, vj, tol_scale)) visit(j);
        });
        return;
    }
    for (long long e = old_ptr[i] + threadIdx.x; e < old_ptr[i + 1]; e += blockDim.x) {
        const int j = old_idx[e];
        if (how == KEEP_ROW || !col_seen[j]) visit(j);
    }
}

// Compression (section 3.3), pass 1, the only read of the matrix: one block per row counts its
// zero-slack edges and, when they fit (COMPRESS_ROW_EDGES), stages their columns: the block
// reserves room for them in `staged` (the CTL_STAGED cursor; `capacity` entries) and copies them
// there, starts[i] = where (-1: not staged, the row is made again by compress_fill). The previous
// CSR (old_ptr, old_idx) is read only for rows `how` does not scan.
template <typename T>
__global__ void compress_scan(const T* C, int n_rows, int n_cols, const double* u, const double* v,
                              double tol_scale, const signed char* how, const long long* old_ptr,
                              const int* old_idx, const int* col_seen, long long* counts, long long* starts,
                              int* staged, long long capacity, u64* ctl) {
    __shared__ int cols[COMPRESS_ROW_EDGES];
    __shared__ unsigned int found;
    __shared__ long long start;
    for (int i = blockIdx.x; i < n_rows; i += gridDim.x) {
        __syncthreads();  // the previous row's copy is done
        if (threadIdx.x == 0) found = 0;
        __syncthreads();
        row_edges(C, i, n_cols, u, v, tol_scale, how[i], old_ptr, old_idx, col_seen, [&](int j) {
            const unsigned int k = atomicAdd(&found, 1u);
            if (k < COMPRESS_ROW_EDGES) cols[k] = j;
        });
        __syncthreads();
        const unsigned int k = found;
        if (threadIdx.x == 0) {
            long long at = -1;
            if (k <= COMPRESS_ROW_EDGES) {
                at = static_cast<long long>(atomicAdd(&ctl[CTL_STAGED], static_cast<u64>(k)));
                if (at + k > capacity) at = -1;
            }
            counts[i] = k;
            starts[i] = at;
            start = at;
        }
        __syncthreads();
        if (start >= 0)
            for (unsigned int t = threadIdx.x; t < k; t += blockDim.x) staged[start + t] = cols[t];
    }
}

// Compression, pass 2 (after the prefix sum of the counts): each row's CSR segment, copied from
// where pass 1 staged it, or for a row it could not stage, made again. The order inside a row
// does not matter to the BFS.
template <typename T>
__global__ void compress_fill(const T* C, int n_rows, int n_cols, const double* u, const double* v,
                              double tol_scale, const signed char* how, const long long* old_ptr,
                              const int* old_idx, const int* col_seen, const long long* starts,
                              const int* staged, const long long* row_ptr, int* col_idx) {
    __shared__ unsigned long long cursor;
    for (int i = blockIdx.x; i < n_rows; i += gridDim.x) {
        const long long from = starts[i], to = row_ptr[i];
        if (from >= 0) {
            const long long k = row_ptr[i + 1] - to;
            for (long long t = threadIdx.x; t < k; t += blockDim.x) col_idx[to + t] = staged[from + t];
            continue;  // block-uniform: no barrier skipped by part of the block
        }
        __syncthreads();
        if (threadIdx.x == 0) cursor = static_cast<unsigned long long>(to);
        __syncthreads();
        row_edges(C, i, n_cols, u, v, tol_scale, how[i], old_ptr, old_idx, col_seen,
                  [&](int j) { col_idx[atomicAdd(&cursor, 1ULL)] = j; });
    }
}

// Forest rows a block of the dual update's scan takes at once (classical_theta, THETA_ROWS in
// constants.py): the rows share the loads of v and col_seen, which a block of one row reads as often
// as the matrix's entries (4 was the fastest of 1, 2, 4 and 8).

// Dual update, stage 1 (Algorithm 7): theta = min slack over forest rows x uncovered columns.
// Each block takes THETA_ROWS forest rows at a time; blocks meet in an atomicMin on order-preserving
// bits. Each forest row also leaves forest_low[q], its smallest uncovered slack less twice its
// zero-slack tolerance: the compression after the shift scans again only the rows where that is
// within reach of theta.
template <typename T>
__global__ void classical_theta(const T* C, int n_cols, const int* rows_q, const double* u,
                                const double* v, const int* col_seen, double tol_scale, double* forest_low,
                                u64* ctl) {
    __shared__ double scratch[32];
    const int n_q = static_cast<int>(ctl[CTL_N_Q]);
    double best = DLAP_INF;
    for (int q0 = blockIdx.x * THETA_ROWS; q0 < n_q; q0 += gridDim.x * THETA_ROWS) {
        const T* rows[THETA_ROWS];
        double ui[THETA_ROWS], low[THETA_ROWS];
#pragma unroll
        for (int r = 0; r < THETA_ROWS; ++r) {
            const int i = rows_q[q0 + r < n_q ? q0 + r : q0];  // past the forest's end, its row q0 again
            rows[r] = C + static_cast<size_t>(i) * n_cols;
            ui[r] = u[i];
            low[r] = DLAP_INF;
        }
        scan_rows<1, THETA_ROWS>(rows, n_cols, v, col_seen, [&](int r, int, double c, double vj) {
            const double s = c - ui[r] - vj;
            best = s < best ? s : best;
            const double s_tol = s - 2 * slack_tolerance(c, ui[r], vj, tol_scale);
            low[r] = s_tol < low[r] ? s_tol : low[r];
        });
#pragma unroll
        for (int r = 0; r < THETA_ROWS; ++r) {
            const double row_low = block_min(low[r], scratch);
            if (threadIdx.x == 0 && q0 + r < n_q) forest_low[q0 + r] = row_low;
        }
    }
    best = block_min(best, scratch);
    if (threadIdx.x == 0 && best < DLAP_INF) atomicMin(&ctl[CTL_THETA], ordered(best));
}

// The compression plan after a dual update (backends/base.py: compression_plan, whose rule this
// applies in one launch; `how` holds KEEP_UNCOVERED for every row before it): a forest row keeps
// its edges, or is scanned again where its forest_low is within `bound` of theta.
extern "C" __global__ void compression_plan(const int* rows_q, const double* forest_low, double bound, int n_q,
                                            signed char* how) {
    const long long tid = global_thread(), n_threads = grid_threads();
    for (long long q = tid; q < n_q; q += n_threads) how[rows_q[q]] = forest_low[q] <= bound ? SCAN_ROW : KEEP_ROW;
}

// Dual update, stage 2 (Algorithm 8): forest rows gain theta, covered columns lose it, so
// assigned edges stay tight and the minimising edge becomes tight.
extern "C" __global__ void classical_shift(const int* rows_q, int n_cols, const int* col_seen,
                                           const u64* ctl, double* u, double* v) {
    const double theta = unordered(ctl[CTL_THETA]);
    if (!(theta < DLAP_INF)) return;
    const long long tid = global_thread(), n_threads = grid_threads();
    const int n_q = static_cast<int>(ctl[CTL_N_Q]);
    for (long long q = tid; q < n_q; q += n_threads) u[rows_q[q]] += theta;
    for (long long j = tid; j < n_cols; j += n_threads)
        if (col_seen[j]) v[j] -= theta;
}
