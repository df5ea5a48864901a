// Initial reduction (Date & Nagi 2016, section 4.1, Algorithm 1) and the Jonker-Volgenant
// initialisation: column reduction and reduction transfer (its augmenting row reduction is a
// run of bidding.cu's rounds of bids with eps = 0).
// Every kernel keeps the duals feasible; v only ever decreases.

// Whether a float matrix, in minimisation form, holds NaN or -inf, scipy's invalid entries
// (*invalid = 1), or finite entries beyond headroom (*huge = 1: the solve scales the matrix by a
// power of two, dlap.problem.FLOAT_HEADROOM): the check of a host matrix that dlap.problem left to
// the GPU, made on each chunk as it lands.
template <typename T>
__global__ void invalid_entries(const T* C, long long n, double headroom, int* invalid, int* huge) {
    for (long long k = global_thread(); k < n; k += grid_threads()) {
        const double x = widen(C[k]);
        if (x != x || x == -DLAP_INF) {
            *invalid = 1;
            return;
        }
        if (x != DLAP_INF && fabs(x) > headroom) *huge = 1;
    }
}

// Row reduction (Algorithm 1): u[i] = min_j (C[i][j] - v[j]), with v = 0 for the paper's
// reduction; with the column duals it is the last step of JV initialisation (the largest row
// duals that keep v feasible).
// One block per row: the row is read coalesced at full bandwidth.
template <typename T>
__global__ void row_minimum(const T* C, int n_rows, int n_cols, const double* v, double* u) {
    __shared__ double scratch[32];
    for (int i = blockIdx.x; i < n_rows; i += gridDim.x) {
        const T* row = C + static_cast<size_t>(i) * n_cols;
        double low = DLAP_INF;
        for (int j = threadIdx.x; j < n_cols; j += blockDim.x) {
            const double r = widen(row[j]) - v[j];
            low = r < low ? r : low;
        }
        low = block_min(low, scratch);
        if (threadIdx.x == 0) u[i] = low;
    }
}

// Column reduction (Algorithm 1), first stage: minimum of C[i][j] - u[i] (u = 0 for JV's column
// reduction) over the rows of each
// band, and the first row reaching it. blockIdx.y is the band within [row_begin, row_end), so a
// chunk of rows can be reduced as soon as the host-to-device copy has delivered it. Threads map
// to columns: consecutive threads read consecutive entries of a row.
template <typename T>
__global__ void column_minimum_bands(const T* C, int row_begin, int row_end, int n_cols,
                                     const double* u, int band_rows, int band_offset,
                                     double* band_low, int* band_arg) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n_cols) return;
    const int lo = row_begin + blockIdx.y * band_rows;
    const int hi = min(row_end, lo + band_rows);
    double low = DLAP_INF;
    int arg = -1;
    for (int i = lo; i < hi; ++i) {
        const double r = widen(C[static_cast<size_t>(i) * n_cols + j]) - u[i];
        if (r < low) { low = r; arg = i; }
    }
    const size_t k = static_cast<size_t>(band_offset + blockIdx.y) * n_cols + j;
    band_low[k] = low;
    band_arg[k] = arg;
}

// Column reduction, second stage: v[j] and argmin[j] over the bands in row order, so ties go to
// the first row, as on the CPU.
extern "C" __global__ void column_minimum_combine(const double* band_low, const int* band_arg,
                                                  int n_bands, int n_cols, double* v, int* argmin) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n_cols) return;
    double low = DLAP_INF;
    int arg = -1;
    for (int b = 0; b < n_bands; ++b) {
        const size_t k = static_cast<size_t>(b) * n_cols + j;
        if (band_low[k] < low) { low = band_low[k]; arg = band_arg[k]; }
    }
    v[j] = low;
    argmin[j] = arg;
}

// Initial assignment after the paper's reduction (section 4.1): each row takes a free zero-slack
// column. One block per row scans a tile of columns at a time; a column is taken with atomicCAS
// (the paper's race), and a thread that wins a column after its row already has one gives it
// back. Greedy, like the CPU version: rows left free go to the searches.
template <typename T>
__global__ void initial_assignment(const T* C, int n_rows, int n_cols, const double* u,
                                   const double* v, double tol_scale, int* row_match,
                                   int* col_match) {
    __shared__ int taken;
    for (int i = blockIdx.x; i < n_rows; i += gridDim.x) {
        const T* row = C + static_cast<size_t>(i) * n_cols;
        __syncthreads();
        if (threadIdx.x == 0) taken = 0;
        __syncthreads();
        for (int j0 = 0; j0 < n_cols; j0 += blockDim.x) {
            const int j = j0 + threadIdx.x;
            if (j < n_cols && !taken && col_match[j] < 0 && zero_slack(widen(row[j]), u[i], v[j], tol_scale) &&
                atomicCAS(&col_match[j], -1, i) == -1) {
                if (atomicCAS(&taken, 0, 1) == 0) row_match[i] = j;
                else col_match[j] = -1;
            }
            __syncthreads();
            const bool done = taken;
            __syncthreads();  // every thread has read `taken` before the next tile may set it
            if (done) break;
        }
    }
}

// JV column reduction, assignment: each row holding the minimum of some columns takes the first
// of them, as the CPU backend does (a constant matrix gets the identity, as from scipy).
extern "C" __global__ void jv_claim_minima(const int* argmin, int n_cols, int* count, int* first_col) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n_cols || argmin[j] < 0) return;
    atomicAdd(&count[argmin[j]], 1);
    atomicMin(&first_col[argmin[j]], j);
}

extern "C" __global__ void jv_assign_minima(int n_rows, const int* count, const int* first_col,
                                            int* row_match, int* col_match) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_rows || count[i] == 0) return;
    row_match[i] = first_col[i];
    col_match[first_col[i]] = i;
}

// JV reduction transfer: a row that got exactly one column moves its second-smallest reduced
// cost into that column's dual. All rows read the duals before any is lowered (transfer[] is
// applied by jv_apply_transfer), so the result does not depend on scheduling.
template <typename T>
__global__ void jv_reduction_transfer(const T* C, int n_rows, int n_cols, const int* count,
                                      const int* row_match, const double* v, double* transfer) {
    __shared__ double scratch[32];
    for (int i = blockIdx.x; i < n_rows; i += gridDim.x) {
        if (count[i] != 1) continue;  // uniform over the block
        const T* row = C + static_cast<size_t>(i) * n_cols;
        const int j1 = row_match[i];
        double second = DLAP_INF;
        for (int j = threadIdx.x; j < n_cols; j += blockDim.x) {
            const double r = widen(row[j]) - v[j];
            if (j != j1 && r < second) second = r;
        }
        second = block_min(second, scratch);
        if (threadIdx.x == 0) transfer[i] = second;
    }
}

extern "C" __global__ void jv_apply_transfer(int n_rows, const int* count, const int* row_match,
                                             const double* transfer, double* v) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_rows || count[i] != 1 || !(transfer[i] < DLAP_INF)) return;
    v[row_match[i]] -= transfer[i];
}
