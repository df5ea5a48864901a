// Deep Greedy Switching on the GPU (Roverso et al., section 5; the CPU twin is backends/cpu/dgs.py).
//
// Candidate k < n_rows is agent k's best 2-exchange (ADE, Algorithm 2), k >= n_rows job
// k - n_rows's (JDE); a candidate is the pair of columns (cand_a, cand_b) whose holders swap.
// Deltas are computed in the same order of operations as on the CPU, and every tie goes to the
// lowest index, so both devices make the same choices.

#define NO_INDEX 0x7fffffff

__device__ __forceinline__ void lexmin(double& d, int& i, double d2, int i2) {
    if (d2 < d || (d2 == d && i2 < i)) { d = d2; i = i2; }
}

// (lowest value, then lowest index) over the block; thread 0 gets it. Scratch: 32 + 32 entries.
__device__ __forceinline__ void block_lexmin(double& d, int& i, double* sd, int* si) {
    for (int o = 16; o > 0; o >>= 1) {
        lexmin(d, i, __shfl_xor_sync(0xffffffffu, d, o), __shfl_xor_sync(0xffffffffu, i, o));
    }
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, n_warps = (blockDim.x + 31) >> 5;
    __syncthreads();
    if (lane == 0) { sd[warp] = d; si[warp] = i; }
    __syncthreads();
    if (warp == 0) {
        d = lane < n_warps ? sd[lane] : DLAP_INF;
        i = lane < n_warps ? si[lane] : NO_INDEX;
        for (int o = 16; o > 0; o >>= 1) {
            lexmin(d, i, __shfl_xor_sync(0xffffffffu, d, o), __shfl_xor_sync(0xffffffffu, i, o));
        }
    }
}

// Difference evaluation (Algorithm 2) of the listed entities, one block each (section 5, the
// shared-memory variant: the block's threads evaluate one 2-exchange each and reduce the best in
// shared memory). ADE of agent i walks row i of C and row tau(i) of C^T; JDE of job j walks row j
// of C^T and row sigma(j) of C: contiguous rows, the gathered one cached.
template <typename T>
__global__ void dgs_evaluate(const T* C, const T* CT, int n_rows, int n_cols, const int* row_match,
                             const int* col_match, const double* held, const int* entities,
                             int n_entities, double tol_scale, int stamp, int* cand_a, int* cand_b,
                             double* cand_delta, int* cand_stamp, int* dirty) {
    __shared__ double sd[32];
    __shared__ int si[32];
    for (int e = blockIdx.x; e < n_entities; e += gridDim.x) {
        const int k = entities[e];
        double best = 0.0;
        int arg = NO_INDEX, a;
        if (k < n_rows) {  // ADE: agent k exchanges job a = tau(k) for job b
            a = row_match[k];
            const double ha = held[a];
            const T* row = C + static_cast<size_t>(k) * n_cols;
            const T* col = CT + static_cast<size_t>(a) * n_rows;
            for (int b = threadIdx.x; b < n_cols; b += blockDim.x) {
                if (b == a) continue;
                const double cib = widen(row[b]);
                double d = cib - ha, s = fabs(cib) + fabs(ha);
                const int y = col_match[b];
                if (y >= 0) {
                    const double cya = widen(col[y]), hb = held[b];
                    d += cya - hb;
                    s += fabs(cya) + fabs(hb);
                }
                if (d < -tol_scale * s) lexmin(best, arg, d, b);
            }
        } else {  // JDE: job a = k - n_rows passes from sigma(a) to agent r (sigma(a) takes tau(r))
            a = k - n_rows;
            const int x = col_match[a];
            const double ha = held[a];
            const T* col = CT + static_cast<size_t>(a) * n_rows;
            const T* rowx = C + static_cast<size_t>(x < 0 ? 0 : x) * n_cols;
            for (int r = threadIdx.x; r < n_rows; r += blockDim.x) {
                if (r == x) continue;
                const int b = row_match[r];
                const double crj = widen(col[r]), hb = held[b];
                double d = crj - hb, s = fabs(crj) + fabs(hb);
                if (x >= 0) {
                    const double cxb = widen(rowx[b]);
                    d += cxb - ha;
                    s += fabs(cxb) + fabs(ha);
                }
                if (d < -tol_scale * s) lexmin(best, arg, d, r);
            }
        }
        block_lexmin(best, arg, sd, si);
        if (threadIdx.x == 0) {
            const bool found = arg != NO_INDEX;
            cand_a[k] = a;
            cand_b[k] = !found ? 0 : (k < n_rows ? arg : row_match[arg]);
            cand_delta[k] = found ? best : 0.0;
            cand_stamp[k] = stamp;
            dirty[k] = 0;
        }
        __syncthreads();  // the scratch is reused by the next entity
    }
}

__device__ __forceinline__ void mark_dirty(int k, int* dirty, int* dirty_list, u64* ctl) {
    if (atomicExch(dirty + k, 1) == 0) {
        dirty_list[atomicAdd(ctl, 1ULL)] = k;  // ctl[0]: entities listed for re-evaluation
    }
}

// Conflict check (Algorithm 4), first pass: drop stale candidates (a column changed hands since
// they were evaluated) and listing their entities; the lowest delta touching each column.
extern "C" __global__ void dgs_select_best(const int* cand_a, const int* cand_b, double* cand_delta,
                                           const int* cand_stamp, const int* col_stamp, int n_cand,
                                           u64* best_key, int* dirty, int* dirty_list, u64* ctl) {
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= n_cand) return;
    const double d = cand_delta[k];
    if (!(d < 0.0)) return;
    const int a = cand_a[k], b = cand_b[k];
    if (col_stamp[a] > cand_stamp[k] || col_stamp[b] > cand_stamp[k]) {
        cand_delta[k] = 0.0;
        mark_dirty(k, dirty, dirty_list, ctl);
        return;
    }
    atomicMin(best_key + a, ordered(d));
    atomicMin(best_key + b, ordered(d));
}

// Second pass: among the candidates reaching a column's lowest delta, the lowest index.
extern "C" __global__ void dgs_select_id(const int* cand_a, const int* cand_b, const double* cand_delta,
                                         int n_cand, const u64* best_key, int* best_id) {
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= n_cand) return;
    const double d = cand_delta[k];
    if (!(d < 0.0)) return;
    const int a = cand_a[k], b = cand_b[k];
    if (best_key[a] == ordered(d)) atomicMin(best_id + a, k);
    if (best_key[b] == ordered(d)) atomicMin(best_id + b, k);
}

// Parallel switch (Algorithm 3): a candidate that is the best at both its columns is applied.
// Those candidates share no column (hence no agent), so they swap without races; the agents and
// jobs they move are listed for re-evaluation. ctl[1] counts the switches.
template <typename T>
__global__ void dgs_switch(const T* C, int n_rows, int n_cols, const int* cand_a, const int* cand_b,
                           const double* cand_delta, int n_cand, const int* best_id, int* row_match,
                           int* col_match, double* held, int* col_stamp, int stamp, int* dirty,
                           int* dirty_list, u64* ctl) {
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= n_cand) return;
    const int a = cand_a[k], b = cand_b[k];
    if (!(cand_delta[k] < 0.0) || best_id[a] != k || best_id[b] != k) return;
    const int x = col_match[a], y = col_match[b];
    col_match[a] = y;
    col_match[b] = x;
    held[a] = y >= 0 ? widen(C[static_cast<size_t>(y) * n_cols + a]) : 0.0;
    held[b] = x >= 0 ? widen(C[static_cast<size_t>(x) * n_cols + b]) : 0.0;
    if (x >= 0) { row_match[x] = b; mark_dirty(x, dirty, dirty_list, ctl); }
    if (y >= 0) { row_match[y] = a; mark_dirty(y, dirty, dirty_list, ctl); }
    col_stamp[a] = stamp;
    col_stamp[b] = stamp;
    mark_dirty(n_rows + a, dirty, dirty_list, ctl);
    mark_dirty(n_rows + b, dirty, dirty_list, ctl);
    atomicAdd(ctl + 1, 1ULL);
}

// The held costs after the start: held[j] = C[col_match[j], j] (0 for an unheld job), widened
// exactly (float32 subnormals survive, where CuPy's conversion flushes them to zero).
template <typename T>
__global__ void dgs_held(const T* C, int n_cols, const int* col_match, double* held) {
    const long long tid = global_thread(), n_threads = grid_threads();
    for (long long j = tid; j < n_cols; j += n_threads) {
        const int i = col_match[j];
        held[j] = i >= 0 ? widen(C[static_cast<size_t>(i) * n_cols + j]) : 0.0;
    }
}

// Greedy start, one round: each listed row's cheapest unheld column (-1: none is finite), one
// block per row.
template <typename T>
__global__ void dgs_propose(const T* C, int n_cols, const int* rows, int n_list, const int* col_match,
                            int* out_cols, double* out_costs) {
    __shared__ double sd[32];
    __shared__ int si[32];
    for (int e = blockIdx.x; e < n_list; e += gridDim.x) {
        const T* row = C + static_cast<size_t>(rows[e]) * n_cols;
        double best = DLAP_INF;
        int arg = NO_INDEX;
        for (int j = threadIdx.x; j < n_cols; j += blockDim.x) {
            if (col_match[j] < 0) lexmin(best, arg, widen(row[j]), j);
        }
        block_lexmin(best, arg, sd, si);
        if (threadIdx.x == 0) {
            const bool found = best < DLAP_INF;
            out_cols[e] = found ? arg : -1;
            out_costs[e] = best;
        }
        __syncthreads();
    }
}
