// The sparse-core engine's kernels (dlap/points/core.py); the CPU twin is backends/cpu/points.py,
// with the same arithmetic in the same order (this module is compiled without FMA contraction),
// so both devices compute the same costs (minkowski's pow within its last bits).

template <typename T>
__device__ double point_cost(const T* a, const T* b, const double* na, const double* nb, long long i,
                             long long j, int d, int metric, double p, double sign) {
  const T* x = a + i * d;
  const T* y = b + j * d;
  double s = 0.0;
  if (metric <= 1) {  // euclidean, sqeuclidean
    for (int k = 0; k < d; ++k) {
      double t = widen(x[k]) - widen(y[k]);
      s += t * t;
    }
    if (metric == 0) s = sqrt(s);
  } else if (metric == 2) {  // cityblock
    for (int k = 0; k < d; ++k) s += fabs(widen(x[k]) - widen(y[k]));
  } else if (metric == 3) {  // minkowski
    for (int k = 0; k < d; ++k) s += pow(fabs(widen(x[k]) - widen(y[k])), p);
    s = pow(s, 1.0 / p);
  } else {  // cosine
    for (int k = 0; k < d; ++k) s += widen(x[k]) * widen(y[k]);
    s = 1.0 - s / (na[i] * nb[j]);
  }
  return sign * s;
}

// Row i's list is searched by warp i (ROW_LANES threads): lane l scans columns l, l + 32, ...;
// the columns a lane finds go into the row's ascending list one at a time in column order, so
// the kernels keep the one-pass order (ties: the lower column) at 32 columns a step.
#define ALL_LANES 0xffffffffu

// The warp puts (key, item) into the ascending keys[0..size) after the equal keys (items come in
// increasing order), the last dropped where size == cap; returns the new size. Every lane calls
// it with the same arguments.
__device__ int warp_insert_sorted(double* keys, long long* items, int size, int cap, double key, long long item,
                                  int lane) {
  int at = 0;
  for (int base = 0; base < size; base += ROW_LANES) {
    const int t = base + lane;
    at += __popc(__ballot_sync(ALL_LANES, t < size && keys[t] <= key));
  }
  const int end = size < cap ? size : cap - 1;  // entries [at, end) move up one, the top first
  for (int base = ((end - 1) / ROW_LANES) * ROW_LANES; end > at && base + ROW_LANES > at; base -= ROW_LANES) {
    const int t = base + lane;
    const bool moves = t >= at && t < end;
    double k = 0.0;
    long long x = 0;
    if (moves) {
      k = keys[t];
      x = items[t];
    }
    __syncwarp();
    if (moves) {
      keys[t + 1] = k;
      items[t + 1] = x;
    }
    __syncwarp();
  }
  if (lane == 0 && at < cap) {
    keys[at] = key;
    items[at] = item;
  }
  __syncwarp();
  return size < cap ? size + 1 : cap;
}

// Each lane's found column joins the row's list, in column order, while it still beats the
// list's last (`worst`, +inf until the list holds cap); the warp's new list size.
__device__ int warp_take(double* keys, long long* items, int size, int cap, double& worst, unsigned found,
                         double key, long long base, int lane) {
  while (found) {
    const int l = __ffs(found) - 1;
    found &= found - 1;
    const double k = __shfl_sync(ALL_LANES, key, l);
    if (size < cap || k < worst) {
      size = warp_insert_sorted(keys, items, size, cap, k, base + l, lane);
      if (size == cap) worst = keys[cap - 1];
    }
  }
  return size;
}

// The list's slots [size, k) set to none (+inf, -1), by the warp.
__device__ void fill_tail(double* keys, long long* items, int size, int k, int lane) {
  for (int t = size + lane; t < k; t += ROW_LANES) {
    keys[t] = DLAP_INF;
    items[t] = -1;
  }
}

// Row i's k cheapest columns, cheapest first (ties: the lower column). One warp per row.
template <typename T>
__global__ void nearest_columns(const T* a, const T* b, const double* na, const double* nb, long long n,
                                long long m, int d, int metric, double p, double sign, int k, long long* index,
                                double* cost) {
  const long long i = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / ROW_LANES;
  const int lane = threadIdx.x % ROW_LANES;
  if (i >= n) return;  // (whole warps)
  double* keys = cost + i * k;
  long long* items = index + i * k;
  int size = 0;
  double worst = DLAP_INF;
  for (long long base = 0; base < m; base += ROW_LANES) {
    const long long j = base + lane;
    const double c = j < m ? point_cost(a, b, na, nb, i, j, d, metric, p, sign) : DLAP_INF;
    size = warp_take(keys, items, size, k, worst, __ballot_sync(ALL_LANES, c < worst), c, base, lane);
  }
  fill_tail(keys, items, size, k, lane);
}

// A given matrix's row rows[r]: its k cheapest entries among columns[0..count) (ascending), as
// their positions in columns, cheapest first (ties: the lower column), -1 and inf past its
// allowed ones (+inf entries are forbidden). One warp per row.
template <typename T>
__global__ void cheapest_among(const T* c, long long m, const long long* rows, long long n_rows,
                               const long long* columns, long long count, int k, long long* index, double* cost) {
  const long long r = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / ROW_LANES;
  const int lane = threadIdx.x % ROW_LANES;
  if (r >= n_rows) return;  // (whole warps)
  const T* row = c + rows[r] * m;
  double* keys = cost + r * k;
  long long* items = index + r * k;
  int size = 0;
  double worst = DLAP_INF;
  for (long long base = 0; base < count; base += ROW_LANES) {
    const long long t = base + lane;
    const double x = t < count ? widen(row[columns[t]]) : DLAP_INF;
    size = warp_take(keys, items, size, k, worst, __ballot_sync(ALL_LANES, x < worst), x, base, lane);
  }
  fill_tail(keys, items, size, k, lane);
}

// Pricing: row i's most negative reduced costs c - u_i - v_j below -(rtol (|c| + |u_i| + |v_j|) + atol),
// at most cap of them, and how many there were. One warp per row.
template <typename T>
__global__ void price(const T* a, const T* b, const double* na, const double* nb, long long n, long long m, int d,
                      int metric, double p, double sign, const double* u, const double* v, double rtol, double atol, int cap,
                      long long* index, double* reduced, long long* count) {
  const long long i = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / ROW_LANES;
  const int lane = threadIdx.x % ROW_LANES;
  if (i >= n) return;  // (whole warps)
  double* keys = reduced + i * cap;
  long long* items = index + i * cap;
  long long found = 0;
  int size = 0;
  double worst = DLAP_INF;
  const double ui = u[i];
  for (long long base = 0; base < m; base += ROW_LANES) {
    const long long j = base + lane;
    bool violated = false;
    double r = 0.0;
    if (j < m) {
      const double c = point_cost(a, b, na, nb, i, j, d, metric, p, sign);
      r = c - ui - v[j];
      violated = r < -(rtol * (fabs(c) + fabs(ui) + fabs(v[j])) + atol);
    }
    const unsigned violators = __ballot_sync(ALL_LANES, violated);
    if (!violators) continue;
    found += __popc(violators);
    size = warp_take(keys, items, size, cap, worst, __ballot_sync(ALL_LANES, violated && r < worst), r, base, lane);
  }
  if (lane == 0) count[i] = found;
}

// out[r * m + j] = c[start + r, j] for rows r < rows.
template <typename T>
__global__ void block_costs(const T* a, const T* b, const double* na, const double* nb, long long rows, long long m,
                            int d, int metric, double p, double sign, long long start, double* out) {
  long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (t >= rows * m) return;
  out[t] = point_cost(a, b, na, nb, start + t / m, t % m, d, metric, p, sign);
}

// out[t] = c[rows[t], cols[t]].
template <typename T>
__global__ void pair_costs(const T* a, const T* b, const double* na, const double* nb, long long n, int d,
                           int metric, double p, double sign, const long long* rows, const long long* cols,
                           double* out) {
  long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (t >= n) return;
  out[t] = point_cost(a, b, na, nb, rows[t], cols[t], d, metric, p, sign);
}
