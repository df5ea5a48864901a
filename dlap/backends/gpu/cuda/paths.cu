// Optimality check (Date & Nagi 2016, section 4.2), reverse pass (4.3.2, Algorithm 5) and
// augmentation pass (4.3.3, Algorithm 6), shared by both variants.

// Optimality check: stream compaction of the unassigned rows into free_rows; ctl[CTL_N_FREE]
// (zeroed by the host) ends as their number.
extern "C" __global__ void optimality_check(const int* row_match, int n_rows, int* free_rows, u64* ctl) {
    const long long tid = global_thread(), n_threads = grid_threads();
    for (long long i = tid; i < n_rows; i += n_threads)
        if (row_match[i] < 0) free_rows[atomicAdd(&ctl[CTL_N_FREE], 1ULL)] = static_cast<int>(i);
}

// Reverse pass: one thread per reverse column traces the path back to its root through the
// predecessor arrays. Two free columns of one tree share the root; the first to claim it keeps
// its path (the paper's race, Proposition 2), so the kept paths are vertex-disjoint. The winner
// records the successor of every row on its path (S_r) and the root in aug_roots.
extern "C" __global__ void reverse_pass(const int* reverse, const int* col_pred, const int* row_pred,
                                        int* claimed, int* succ_row, int* aug_roots, u64* ctl) {
    const long long r = global_thread();
    if (r >= static_cast<long long>(ctl[CTL_N_REV])) return;
    int j = reverse[r];
    int i = col_pred[j];
    while (row_pred[i] >= 0) i = col_pred[row_pred[i]];
    if (atomicCAS(&claimed[i], 0, 1) != 0) return;
    aug_roots[atomicAdd(&ctl[CTL_N_PATHS], 1ULL)] = i;
    while (j >= 0) {
        i = col_pred[j];
        succ_row[i] = j;
        j = row_pred[i];
    }
}

// Augmentation: one thread per kept path flips its unassigned and assigned edges from the root,
// then releases the root's claim for the next iteration. Paths are vertex-disjoint, so no two
// threads touch one row or column.
extern "C" __global__ void augment(const int* aug_roots, const int* succ_row, int* row_match,
                                   int* col_match, int* claimed, const u64* ctl) {
    const long long p = global_thread();
    if (p >= static_cast<long long>(ctl[CTL_N_PATHS])) return;
    const int root = aug_roots[p];
    int i = root;
    while (true) {
        const int j = succ_row[i];
        const int next = col_match[j];
        row_match[i] = j;
        col_match[j] = i;
        if (next < 0) break;
        i = next;
    }
    claimed[root] = 0;
}
