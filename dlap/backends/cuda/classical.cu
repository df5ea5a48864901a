// The classical (Munkres) variant of Date & Nagi (2016): zero-slack compression (section 3.3) and
// the two-stage dual update (4.4, Algorithms 7 and 8). Its forward pass is in forward.cu.

// Row entries a thread of the compression loads at once before it uses the first (a row scan with
// one load in flight is a chain of dependent loads): on an H200, uniform n = 20000 / 40000, the
// compressions (two reads of the matrix then) took 11% / 12% less time with 4 than with 1, and 8
// lost; the dual update's scan, which skips covered columns, was fastest with 1
// (workflows/results/scaling-gpu-20261123-classical-batch-ab.log).
#ifndef CLASSICAL_BATCH
#define CLASSICAL_BATCH 4
#endif
// Zero-slack edges a row keeps in shared memory during the compression's one pass over the matrix;
// a row with more is scanned again after the prefix sum (compress_fill)
#define COMPRESS_ROW_EDGES 1024

// visit(j, C[i][j], v[j]) for each column j of `row` this thread takes (threadIdx.x, then every
// blockDim.x) whose entry is finite, BATCH loads at a time; columns `skip` marks (col_seen;
// nullptr: none) are not read.
template <int BATCH, typename T, typename F>
__device__ __forceinline__ void scan_row(const T* row, int n_cols, const double* v, const int* skip, F&& visit) {
    for (int j0 = threadIdx.x; j0 < n_cols; j0 += BATCH * blockDim.x) {
        double c[BATCH], vv[BATCH];
#pragma unroll
        for (int b = 0; b < BATCH; ++b) {
            const int j = j0 + b * blockDim.x;
            const bool in = j < n_cols && !(skip && skip[j]);
            c[b] = in ? widen(row[j]) : DLAP_INF;
            vv[b] = in ? v[j] : 0.0;
        }
#pragma unroll
        for (int b = 0; b < BATCH; ++b)
            if (c[b] < DLAP_INF) visit(j0 + b * blockDim.x, c[b], vv[b]);
    }
}

// Compression (section 3.3), pass 1, the only read of the matrix: one block per row counts its
// zero-slack edges and, when they fit (COMPRESS_ROW_EDGES), stages their columns: the block
// reserves room for them in `staged` (the CTL_STAGED cursor; `capacity` entries) and copies them
// there, starts[i] = where (-1: not staged, the row is scanned again by compress_fill).
template <typename T>
__global__ void compress_scan(const T* C, int n_rows, int n_cols, const double* u, const double* v,
                              double tol_scale, long long* counts, long long* starts, int* staged,
                              long long capacity, u64* ctl) {
    __shared__ int cols[COMPRESS_ROW_EDGES];
    __shared__ unsigned int found;
    __shared__ long long start;
    for (int i = blockIdx.x; i < n_rows; i += gridDim.x) {
        const double ui = u[i];
        __syncthreads();  // the previous row's copy is done
        if (threadIdx.x == 0) found = 0;
        __syncthreads();
        scan_row<CLASSICAL_BATCH>(C + static_cast<size_t>(i) * n_cols, n_cols, v, nullptr, [&](int j, double c, double vj) {
            if (zero_slack(c, ui, vj, tol_scale)) {
                const unsigned int k = atomicAdd(&found, 1u);
                if (k < COMPRESS_ROW_EDGES) cols[k] = j;
            }
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
// where pass 1 staged it, or for a row it could not stage, from a second scan of the row. The
// order inside a row does not matter to the BFS.
template <typename T>
__global__ void compress_fill(const T* C, int n_rows, int n_cols, const double* u, const double* v,
                              double tol_scale, const long long* starts, const int* staged,
                              const long long* row_ptr, int* col_idx) {
    __shared__ unsigned long long cursor;
    for (int i = blockIdx.x; i < n_rows; i += gridDim.x) {
        const long long from = starts[i], to = row_ptr[i];
        if (from >= 0) {
            const long long k = row_ptr[i + 1] - to;
            for (long long t = threadIdx.x; t < k; t += blockDim.x) col_idx[to + t] = staged[from + t];
            continue;  // block-uniform: no barrier skipped by part of the block
        }
        const double ui = u[i];
        __syncthreads();
        if (threadIdx.x == 0) cursor = static_cast<unsigned long long>(to);
        __syncthreads();
        scan_row<CLASSICAL_BATCH>(C + static_cast<size_t>(i) * n_cols, n_cols, v, nullptr, [&](int j, double c, double vj) {
            if (zero_slack(c, ui, vj, tol_scale)) col_idx[atomicAdd(&cursor, 1ULL)] = j;
        });
    }
}

// Dual update, stage 1 (Algorithm 7): theta = min slack over forest rows x uncovered columns.
// One block per forest row; blocks meet in an atomicMin on order-preserving bits.
template <typename T>
__global__ void classical_theta(const T* C, int n_cols, const int* rows_q, const double* u,
                                const double* v, const int* col_seen, u64* ctl) {
    __shared__ double scratch[32];
    const int n_q = static_cast<int>(ctl[CTL_N_Q]);
    double best = DLAP_INF;
    for (int q = blockIdx.x; q < n_q; q += gridDim.x) {
        const int i = rows_q[q];
        const double ui = u[i];
        scan_row<1>(C + static_cast<size_t>(i) * n_cols, n_cols, v, col_seen, [&](int, double c, double vj) {
            const double r = c - ui - vj;
            best = r < best ? r : best;
        });
    }
    best = block_min(best, scratch);
    if (threadIdx.x == 0 && best < DLAP_INF) atomicMin(&ctl[CTL_THETA], ordered(best));
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
