// The alternating tree variant of Date & Nagi (2016): the O(n) dual update (section 4.4,
// Algorithm 9) after a search. Its forward pass is in forward.cu.

// Dual update (Algorithm 9), once per search: a row that joined at level t gains level - t, a
// column that became tight at level s loses level - s. Counts and level come from ctl, so the
// host launches it without reading anything.
extern "C" __global__ void tree_dual_update(const int* rows_q, const double* row_level,
                                            const int* forest_cols, const double* col_level,
                                            const u64* ctl, double* u, double* v) {
    const long long tid = global_thread(), n_threads = grid_threads();
    const double level = __longlong_as_double(static_cast<long long>(ctl[CTL_LEVEL]));
    const long long n_q = static_cast<long long>(ctl[CTL_N_Q]);
    const long long n_forest = static_cast<long long>(ctl[CTL_N_FOREST]);
    for (long long q = tid; q < n_q; q += n_threads) {
        const int i = rows_q[q];
        u[i] += level - row_level[i];
    }
    for (long long q = tid; q < n_forest; q += n_threads) {
        const int j = forest_cols[q];
        v[j] -= level - col_level[j];
    }
}

// Expansion for an explicit frontier (Algorithm 4; the Dask engine's tree search on a column
// slab): one thread per column walks the frontier rows rows[0..n) in order, so a warp reads
// consecutive entries of each row (coalesced in the row-major slab). A column keeps the first
// row that gives its lowest slack, as the CPU kernel does.
template <typename T>
__global__ void tree_scan(const T* C, int n_cols, const int* rows, const double* shift, int n,
                          const double* v_open, double* slack, int* col_pred) {
    const long long tid = global_thread(), n_threads = grid_threads();
    for (long long j = tid; j < n_cols; j += n_threads) {
        const double vj = v_open[j];
        double best = slack[j];
        int pred = -1;
        for (int q = 0; q < n; ++q) {
            const int i = rows[q];
            const double s = shift[q] + (widen(C[static_cast<size_t>(i) * n_cols + j]) - vj);
            if (s < best) {
                best = s;
                pred = i;
            }
        }
        if (pred >= 0) {
            slack[j] = best;
            col_pred[j] = pred;
        }
    }
}
