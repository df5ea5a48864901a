// Batched assignment: one thread block per problem (dlap/batch.py, issue 15).
//
// Each block solves its problem by shortest augmenting paths, one free row at a time, after
// Jonker-Volgenant's column reduction for a square problem: the Jonker-Volgenant / Crouse search
// that backends/cpu/batch.py runs on one CPU thread, with
// the block's threads splitting each search step's pass over the columns and a block-wide
// arg-min choosing the column to settle. Nothing returns to the host until every problem is
// solved: one launch for the whole batch.
//
// Problem b starts at start[b] in the flat buffer, has rows[b] <= cols[b] working rows and
// columns, and its entry (i, j) is flat[start + i * cols + j], or flat[start + j * rows + i] for
// a caller's matrix with more rows than columns (transposed). The search state lives in global
// workspaces, row_stride / col_stride entries per problem (cached in L1/L2 at these sizes).

__device__ __forceinline__ double batch_entry(float x, long long sign, long long offset) {
    return static_cast<double>(sign) * widen(x);
}
__device__ __forceinline__ double batch_entry(double x, long long sign, long long offset) {
    return static_cast<double>(sign) * x;
}
// integers: sign * c - offset in 64-bit integers (exact in the integer range), then widened
__device__ __forceinline__ double batch_entry(int x, long long sign, long long offset) {
    return static_cast<double>(sign * static_cast<long long>(x) - offset);
}
__device__ __forceinline__ double batch_entry(long long x, long long sign, long long offset) {
    return static_cast<double>(sign * x - offset);
}

// (distance, key) pairs ordered by distance, then key: key = (column is assigned) << 32 | column,
// so on a tie a free column wins (it ends the search), then the lowest column (as on the CPU).
__device__ __forceinline__ bool batch_less(double a, long long ka, double b, long long kb) {
    return a < b || (a == b && ka < kb);
}

template <typename T>
__global__ void batch_augmenting_paths(
    const T* __restrict__ flat, const long long* __restrict__ start, const int* __restrict__ rows_of,
    const int* __restrict__ cols_of, const unsigned char* __restrict__ transposed_of, long long sign,
    const long long* __restrict__ offset_of, int row_stride, int col_stride,
    double* __restrict__ u_all, double* __restrict__ v_all, int* __restrict__ col4row_all,
    int* __restrict__ row4col_all, int* __restrict__ path_all, double* __restrict__ spc_all,
    unsigned char* __restrict__ sr_all, unsigned char* __restrict__ sc_all, int* __restrict__ status)
{
    const int b = blockIdx.x;
    const int rows = rows_of[b], cols = cols_of[b];
    if (rows == 0) return;
    const T* c = flat + start[b];
    const bool transposed = transposed_of[b] != 0;
    const long long offset = offset_of[b];
    double* u = u_all + static_cast<long long>(b) * row_stride;
    int* col4row = col4row_all + static_cast<long long>(b) * row_stride;
    unsigned char* in_sr = sr_all + static_cast<long long>(b) * row_stride;
    double* v = v_all + static_cast<long long>(b) * col_stride;
    int* row4col = row4col_all + static_cast<long long>(b) * col_stride;
    int* path = path_all + static_cast<long long>(b) * col_stride;
    double* spc = spc_all + static_cast<long long>(b) * col_stride;
    unsigned char* in_sc = sc_all + static_cast<long long>(b) * col_stride;

    __shared__ double warp_best[32];
    __shared__ long long warp_key[32];
    __shared__ int s_row, s_sink, s_fail;
    __shared__ double s_min;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, warps = (blockDim.x + 31) >> 5;

    for (int k = tid; k < rows; k += blockDim.x) { u[k] = 0.0; col4row[k] = -1; }
    for (int j = tid; j < cols; j += blockDim.x) { v[j] = 0.0; row4col[j] = -1; }
    if (tid == 0) s_fail = 0;
    __syncthreads();
    if (rows == cols) {
        // Jonker-Volgenant's column reduction (square problems; a rectangular one keeps v = 0,
        // its longer side's duals must end <= 0): v_j = the column's minimum, and each column goes
        // to its minimum's row while that row is free, in column order (as on the CPU)
        for (int j = tid; j < cols; j += blockDim.x) {
            double lowest = DLAP_INF;
            int lowest_row = -1;
            for (int i = 0; i < rows; ++i) {
                const T x = transposed ? c[static_cast<long long>(j) * rows + i] : c[static_cast<long long>(i) * cols + j];
                const double r = batch_entry(x, sign, offset);
                if (r < lowest) { lowest = r; lowest_row = i; }
            }
            v[j] = lowest < DLAP_INF ? lowest : 0.0;
            path[j] = lowest_row;
        }
        __syncthreads();
        if (tid == 0)
            for (int j = 0; j < cols; ++j) {
                const int i = path[j];
                if (i >= 0 && col4row[i] < 0) { col4row[i] = j; row4col[j] = i; }
            }
        __syncthreads();
    }

    for (int cur = 0; cur < rows; ++cur) {
        if (col4row[cur] >= 0) continue;  // the same for every thread: read after a barrier
        for (int k = tid; k < rows; k += blockDim.x) in_sr[k] = 0;
        for (int j = tid; j < cols; j += blockDim.x) { spc[j] = DLAP_INF; in_sc[j] = 0; }
        if (tid == 0) { s_row = cur; s_sink = -1; s_min = 0.0; }
        __syncthreads();
        while (true) {
            const int i = s_row;
            const double min_val = s_min, ui = u[i];
            if (tid == 0) in_sr[i] = 1;
            double best = DLAP_INF;
            long long key = 0x7fffffffffffffffLL;
            for (int j = tid; j < cols; j += blockDim.x) {
                if (in_sc[j]) continue;
                const T x = transposed ? c[static_cast<long long>(j) * rows + i] : c[static_cast<long long>(i) * cols + j];
                const double r = min_val + batch_entry(x, sign, offset) - ui - v[j];
                double d = spc[j];
                if (r < d) { path[j] = i; spc[j] = d = r; }
                const long long kj = (static_cast<long long>(row4col[j] >= 0) << 32) | j;
                if (batch_less(d, kj, best, key)) { best = d; key = kj; }
            }
            for (int step = 16; step > 0; step >>= 1) {  // the warp's arg-min
                const double ob = __shfl_down_sync(0xffffffffu, best, step);
                const long long ok = __shfl_down_sync(0xffffffffu, key, step);
                if (batch_less(ob, ok, best, key)) { best = ob; key = ok; }
            }
            if (lane == 0) { warp_best[warp] = best; warp_key[warp] = key; }
            __syncthreads();
            if (tid == 0) {  // the block's arg-min settles one column
                for (int w = 1; w < warps; ++w)
                    if (batch_less(warp_best[w], warp_key[w], best, key)) { best = warp_best[w]; key = warp_key[w]; }
                if (best == DLAP_INF) {
                    s_fail = 1;
                } else {
                    const int j = static_cast<int>(key & 0xffffffffLL);
                    s_min = best;
                    in_sc[j] = 1;
                    if (row4col[j] < 0) s_sink = j; else s_row = row4col[j];
                }
            }
            __syncthreads();
            if (s_fail || s_sink >= 0) break;
        }
        if (s_fail) break;
        // dual update over the rows and columns the search settled
        const double min_val = s_min;
        for (int k = tid; k < rows; k += blockDim.x)
            if (in_sr[k] && k != cur) u[k] += min_val - spc[col4row[k]];
        for (int j = tid; j < cols; j += blockDim.x)
            if (in_sc[j]) v[j] -= min_val - spc[j];
        __syncthreads();
        if (tid == 0) {  // augment along the path to the sink
            u[cur] += min_val;
            int j = s_sink;
            while (true) {
                const int k = path[j];
                row4col[j] = k;
                const int previous = col4row[k];
                col4row[k] = j;
                j = previous;
                if (k == cur) break;
            }
        }
        __syncthreads();
    }
    if (tid == 0) status[b] = s_fail;
}
