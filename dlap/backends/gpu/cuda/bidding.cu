// Rounds of bids by every free row at once (a Jacobi auction, Bertsekas 1988), run on the device
// by one persistent kernel: Jonker & Volgenant's augmenting row reduction with eps = 0 (the JV
// initialisation, and the start of the ε-scaling engine's exact phase), and the bidding rounds
// that assign most rows of each ε-phase (dlap/hungarian/scaling.py) with eps > 0. The rule is
// backends/cpu/scaling.py's _bids / bidding_round, step for step, so the two backends reach the same prices.
//
// Every free row finds its smallest reduced cost u1 (column j1), the second smallest u2, and
// the smallest over the free columns uf (jf). Its bid:
//   uf == u1 : take the free column jf at no price change (a tight edge that displaces nobody);
//   u1 <  u2 : take j1, lowering v[j1] by (u2 - u1) + eps (then j1 and j2 tie for the row, or
//              j2 is eps better);
//   otherwise (tied minimum on assigned columns, or a single finite entry): with eps = 0 no bid
//              this round; with eps > 0 take j1, lowering v[j1] by (u2 - u1) + eps, or by eps
//              alone when u2 is infinite.
// The highest decrement wins a column, equal ones the lowest row. Lowering one column's dual only
// raises other rows' reduced costs there, so with eps = 0 every assigned row keeps a
// minimum-reduced-cost column and u = min_j (C - v) stays feasible with complementary slackness
// (with eps > 0, within eps of it: Bertsekas' ε-complementary slackness).
//
// A round is three steps separated by grid barriers (bids, each row scanned by a group of
// threads sized to the round's free rows; the winner of each column; winners take their columns
// and every row left free is listed for the next round), so a round costs what its rows' scans
// and three barriers cost, with no host round trip; the stop rules run on the device too (the
// driver's: scaling.bidding).

#define BID_THREADS 1024
// Row entries a thread loads at once, before it uses the first (6 was the fastest of 4, 6 and 8,
// which spills registers)
#ifndef BID_BATCH
#define BID_BATCH 6
#endif

struct Candidate {
    double value;
    int col;
};

__device__ __forceinline__ bool before(const Candidate& a, const Candidate& b) {
    return a.value < b.value || (a.value == b.value && a.col < b.col);
}

// the two smallest (value, col) pairs of (a1 <= a2) and (b1 <= b2)
__device__ __forceinline__ void merge_two(Candidate& a1, Candidate& a2, Candidate b1, Candidate b2) {
    if (before(b1, a1)) {
        a2 = before(a1, b2) ? a1 : b2;
        a1 = b1;
    } else if (before(b1, a2)) {
        a2 = b1;
    }
}

__device__ __forceinline__ Candidate shfl(const Candidate& c, int o) {
    return Candidate{__shfl_xor_sync(0xffffffffu, c.value, o), __shfl_xor_sync(0xffffffffu, c.col, o)};
}

// Threads that bid for one row: the power of two from 32 to blockDim.x at which the free rows
// fill the grid's threads (a whole block per row once fewer rows than blocks are free). A row
// scan is a chain of dependent loads, so one block per row left most of the memory system idle
// while hundreds of rows were free (GEOM benefit n = 10000 on an H200: 118 us per round of 1,359
// bids on average); a group of a few warps per row keeps as many loads in flight as the rows allow.
__device__ __forceinline__ int bid_group_threads(int n_free, long long n_threads) {
    int threads = blockDim.x;
    while (threads > 32 && static_cast<long long>(n_free) * threads > n_threads) threads >>= 1;
    return threads;
}

// The terms of the row that the group of `group_threads` threads holding this thread scans, over
// C[i][j] - v[j]: the smallest (c1, first column on ties), the second smallest over the other
// columns (c2; c2.value == c1.value on a tie) and the smallest over the free columns (cf), in the
// group's first warp (columns 0x7fffffff where the value is +inf). Every thread of the block calls
// this together (row == nullptr: no row for this group). v and col_match are read through L2:
// other blocks of the rounds of bids wrote them last round. The terms are the same whatever the
// group's size (minima with ties to the lowest column).
template <typename T>
__device__ void row_terms(const T* row, int group_threads, int n_cols, const double* v, const int* col_match,
                          Candidate* s1, Candidate* s2, Candidate* sf, Candidate& c1, Candidate& c2, Candidate& cf) {
    const Candidate none{DLAP_INF, 0x7fffffff};
    c1 = c2 = cf = none;
    const int rank = threadIdx.x & (group_threads - 1);
    for (int j0 = row ? rank : n_cols; j0 < n_cols; j0 += BID_BATCH * group_threads) {
        double c[BID_BATCH], vv[BID_BATCH];
        int owner[BID_BATCH];
#pragma unroll
        for (int b = 0; b < BID_BATCH; ++b) {
            const int j = j0 + b * group_threads;
            const bool in = j < n_cols;
            c[b] = in ? widen(__ldg(row + j)) : 0.0;
            vv[b] = in ? ld(v + j) : 0.0;
            owner[b] = in ? ld(col_match + j) : 0;
        }
#pragma unroll
        for (int b = 0; b < BID_BATCH; ++b) {
            const int j = j0 + b * group_threads;
            if (j >= n_cols) break;
            const Candidate x{c[b] - vv[b], j};
            if (before(x, c2)) merge_two(c1, c2, x, none);
            if (owner[b] < 0 && before(x, cf)) cf = x;
        }
    }
    for (int o = 16; o > 0; o >>= 1) {
        merge_two(c1, c2, shfl(c1, o), shfl(c2, o));
        const Candidate of = shfl(cf, o);
        if (before(of, cf)) cf = of;
    }
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, group_warps = group_threads >> 5;
    __syncthreads();  // the previous row's reads of s1, s2, sf are done
    if (lane == 0) { s1[warp] = c1; s2[warp] = c2; sf[warp] = cf; }
    __syncthreads();
    if (warp % group_warps == 0) {  // the group's first warp merges its warps' summaries
        c1 = lane < group_warps ? s1[warp + lane] : none;
        c2 = lane < group_warps ? s2[warp + lane] : none;
        cf = lane < group_warps ? sf[warp + lane] : none;
        for (int o = 16; o > 0; o >>= 1) {
            merge_two(c1, c2, shfl(c1, o), shfl(c2, o));
            const Candidate of = shfl(cf, o);
            if (before(of, cf)) cf = of;
        }
    }
}

// A row's bid from its terms (the rule above): the column it bids for (-1: none) and the
// decrement. backends/cpu/scaling.py's _bid.
__device__ __forceinline__ void bid_rule(double u1, int j1, double u2, double uf, int jf, double eps, int& target,
                                         double& dec) {
    target = -1;
    dec = 0.0;
    if (u1 < DLAP_INF) {
        if (uf == u1) {
            target = jf;
        } else if (u1 < u2 && u2 < DLAP_INF) {
            target = j1;
            dec = (u2 - u1) + eps;
        } else if (eps > 0) {
            target = j1;
            dec = (u2 < DLAP_INF ? u2 - u1 : 0.0) + eps;
        }
    }
}

// The bid of the row (row_terms) that the group holding this thread scans, in the group's first
// thread (bid_rule).
template <typename T>
__device__ void row_bid(const T* row, int group_threads, int n_cols, const double* v, const int* col_match,
                        double eps, Candidate* s1, Candidate* s2, Candidate* sf, int& target, double& dec) {
    Candidate c1, c2, cf;
    row_terms(row, group_threads, n_cols, v, col_match, s1, s2, sf, c1, c2, cf);
    target = -1;
    dec = 0.0;
    if ((threadIdx.x & (group_threads - 1)) == 0) bid_rule(c1.value, c1.col, c2.value, cf.value, cf.col, eps, target, dec);
}

// Backend.bids_of_terms: the bid of each row of terms (rows of u1, j1, u2, uf, jf), for the Dask
// engine's rounds, whose terms are combined over the ranks' slabs.
extern "C" __global__ void bids_of_terms(const double* terms, int n, double eps, int* bid_col, double* bid_dec) {
    const long long q = global_thread();
    if (q >= n) return;
    const double* t = terms + 5 * q;
    int target;
    double dec;
    bid_rule(t[0], static_cast<int>(t[1]), t[2], t[3], static_cast<int>(t[4]), eps, target, dec);
    bid_col[q] = target;
    bid_dec[q] = dec;
}

// Backend.award_bids, in three launches: each column's largest bid (award_best), the lowest row
// bidding it (award_winner), the winners take their columns and lower their prices, displacing
// the rows there, and leave col_best (0) and col_winner (INT_MAX) as they came (award_take).
extern "C" __global__ void award_best(const int* bid_col, const double* bid_dec, int n, u64* col_best) {
    const long long q = global_thread();
    if (q < n && bid_col[q] >= 0) atomicMax(&col_best[bid_col[q]], ordered(bid_dec[q]));
}

extern "C" __global__ void award_winner(const int* rows, const int* bid_col, const double* bid_dec, int n,
                                        const u64* col_best, int* col_winner) {
    const long long q = global_thread();
    if (q < n && bid_col[q] >= 0 && ordered(bid_dec[q]) == col_best[bid_col[q]]) atomicMin(&col_winner[bid_col[q]], rows[q]);
}

extern "C" __global__ void award_take(const int* rows, const int* bid_col, const double* bid_dec, int n, int* row_match,
                                      int* col_match, double* v, u64* col_best, int* col_winner) {
    const long long q = global_thread();
    if (q >= n) return;
    const int j = bid_col[q], i = rows[q];
    if (j < 0 || col_winner[j] != i) return;
    const int previous = col_match[j];  // an assigned row: never a bidder
    if (previous >= 0) row_match[previous] = -1;
    col_match[j] = i;
    row_match[i] = j;
    v[j] -= bid_dec[q];
    col_best[j] = 0;
    col_winner[j] = 0x7fffffff;
}

// Backend.row_minima_terms: terms[q] = (u1, j1, u2, uf, jf) of row rows[q] (row_terms, one block
// per row, columns -1 where the value is +inf): the bids of the Dask engine's ranks, whose rounds
// combine every rank's terms over its columns before any bid (dlap/distributed/rank/backend.py), and
// its reduction transfer. Grid-stride over the rows: this module is launched cooperatively.
template <typename T>
__global__ void __launch_bounds__(BID_THREADS, 1) row_minima_terms(const T* C, int n_cols, const double* v, const int* col_match, const int* rows,
                                 int n, double* terms) {
    __shared__ Candidate s1[32], s2[32], sf[32];
    for (int q = blockIdx.x; q < n; q += gridDim.x) {
        Candidate c1, c2, cf;
        row_terms(C + static_cast<size_t>(rows[q]) * n_cols, blockDim.x, n_cols, v, col_match, s1, s2, sf, c1, c2, cf);
        if (threadIdx.x == 0) {
            double* out = terms + 5 * static_cast<size_t>(q);
            out[0] = c1.value;
            out[1] = c1.value < DLAP_INF ? c1.col : -1;
            out[2] = c2.value;
            out[3] = cf.value;
            out[4] = cf.value < DLAP_INF ? cf.col : -1;
        }
    }
}

// Rounds of bids by the free_rows[0, ctl[CTL_N_FREE]) until at most `tail` rows are free, after
// `max_rounds` rounds, after `stall` rounds in a row that assign no more rows, or (keep_share
// > 0) after a round that leaves more than keep_share of its free rows free. Leaves the free
// rows in free_rows and their number in ctl[CTL_N_FREE]; adds the rounds and the bids to
// ctl[CTL_BID_ROUNDS] and ctl[CTL_BIDS]. next_rows is scratch for the next round's list;
// col_best (0) and col_winner (INT_MAX) are left as they came. Launched cooperatively, one block
// per multiprocessor (grid_sync).
template <typename T>
__global__ void __launch_bounds__(BID_THREADS, 1)
bidding_rounds(const T* C, int n_cols, double* v, double eps, int* row_match, int* col_match, int* free_rows,
               int* next_rows, int* bid_col, double* bid_dec, u64* col_best, int* col_winner, int tail,
               int max_rounds, int stall, double keep_share, u64* ctl, unsigned int* barrier) {
    __shared__ Candidate s1[32], s2[32], sf[32];
    const long long tid = global_thread(), n_threads = grid_threads();
    int n_free = static_cast<int>(ctl[CTL_N_FREE]);
    int rounds = 0, stalled = 0;
    long long bids = 0;
    int *list = free_rows, *next = next_rows;
    while (n_free > tail && rounds < max_rounds) {
        // the count of this round's next list: its slot was last read two rounds ago
        u64* listed = &ctl[CTL_ROTATE + (rounds & 1)];
        if (tid == 0) *listed = 0;
        const int group_threads = bid_group_threads(n_free, n_threads), groups = blockDim.x / group_threads;
        const int group = threadIdx.x / group_threads;
        // block-uniform bounds: every thread of a block takes part in each row_bid's barriers
        for (int f0 = blockIdx.x * groups; f0 < n_free; f0 += gridDim.x * groups) {
            const int f = f0 + group;
            int target;
            double dec;
            row_bid(f < n_free ? C + static_cast<size_t>(ld(list + f)) * n_cols : nullptr, group_threads, n_cols, v,
                    col_match, eps, s1, s2, sf, target, dec);
            if (f < n_free && threadIdx.x % group_threads == 0) {
                bid_col[f] = target;
                bid_dec[f] = dec;
                if (target >= 0) atomicMax(&col_best[target], ordered(dec));
            }
        }
        grid_sync(barrier);
        for (long long f = tid; f < n_free; f += n_threads) {  // the winner of each column
            const int c = ld(bid_col + f);
            if (c >= 0 && ordered(ld(bid_dec + f)) == ld(col_best + c)) atomicMin(&col_winner[c], ld(list + f));
        }
        grid_sync(barrier);
        for (long long f = tid; f < n_free; f += n_threads) {  // winners take their columns
            const int c = ld(bid_col + f), i = ld(list + f);
            if (c >= 0 && ld(col_winner + c) == i) {
                const int previous = ld(col_match + c);
                if (previous >= 0) {
                    row_match[previous] = -1;
                    next[atomicAdd(listed, 1ull)] = previous;
                }
                col_match[c] = i;
                row_match[i] = c;
                v[c] = ld(v + c) - ld(bid_dec + f);
                col_best[c] = 0;
                col_winner[c] = 0x7fffffff;
            } else {
                next[atomicAdd(listed, 1ull)] = i;
            }
        }
        grid_sync(barrier);
        const int previous = n_free;
        n_free = static_cast<int>(ld(listed));
        ++rounds;
        bids += previous;
        stalled = n_free == previous ? stalled + 1 : 0;
        int* swap = list;
        list = next;
        next = swap;
        if ((keep_share > 0 && n_free > previous * keep_share) || stalled >= stall) break;
    }
    if (list != free_rows)
        for (long long f = tid; f < n_free; f += n_threads) free_rows[f] = ld(list + f);
    if (tid == 0) {
        ctl[CTL_N_FREE] = n_free;
        ctl[CTL_BID_ROUNDS] += rounds;
        ctl[CTL_BIDS] += bids;
    }
}
