// The classical (Munkres) variant of Date & Nagi (2016): zero-slack compression (section 3.3) and
// the two-stage dual update (4.4, Algorithms 7 and 8). Its forward pass is in forward.cu.

// Compression, stage 1: zero-slack edges per row (one block per row).
template <typename T>
__global__ void compress_count(const T* C, int n_rows, int n_cols, const double* u,
                               const double* v, double tol_scale, long long* counts) {
    __shared__ long long scratch[32];
    for (int i = blockIdx.x; i < n_rows; i += gridDim.x) {
        const T* row = C + static_cast<size_t>(i) * n_cols;
        const double ui = u[i];
        long long k = 0;
        for (int j = threadIdx.x; j < n_cols; j += blockDim.x) k += zero_slack(widen(row[j]), ui, v[j], tol_scale);
        k = block_sum(k, scratch);
        if (threadIdx.x == 0) counts[i] = k;
    }
}

// Compression, stage 2 (after the prefix sum of the counts): scatter the column indices into the
// row's CSR segment. The order inside a row does not matter to the BFS.
template <typename T>
__global__ void compress_fill(const T* C, int n_rows, int n_cols, const double* u,
                              const double* v, double tol_scale, const long long* row_ptr,
                              int* col_idx) {
    __shared__ unsigned long long cursor;
    for (int i = blockIdx.x; i < n_rows; i += gridDim.x) {
        const T* row = C + static_cast<size_t>(i) * n_cols;
        const double ui = u[i];
        __syncthreads();
        if (threadIdx.x == 0) cursor = static_cast<unsigned long long>(row_ptr[i]);
        __syncthreads();
        for (int j = threadIdx.x; j < n_cols; j += blockDim.x)
            if (zero_slack(widen(row[j]), ui, v[j], tol_scale)) col_idx[atomicAdd(&cursor, 1ULL)] = j;
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
        const T* row = C + static_cast<size_t>(i) * n_cols;
        const double ui = u[i];
        for (int j = threadIdx.x; j < n_cols; j += blockDim.x) {
            if (col_seen[j]) continue;
            const double r = widen(row[j]) - ui - v[j];
            best = r < best ? r : best;
        }
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
