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
      double t = (double)x[k] - (double)y[k];
      s += t * t;
    }
    if (metric == 0) s = sqrt(s);
  } else if (metric == 2) {  // cityblock
    for (int k = 0; k < d; ++k) s += fabs((double)x[k] - (double)y[k]);
  } else if (metric == 3) {  // minkowski
    for (int k = 0; k < d; ++k) s += pow(fabs((double)x[k] - (double)y[k]), p);
    s = pow(s, 1.0 / p);
  } else {  // cosine
    for (int k = 0; k < d; ++k) s += (double)x[k] * (double)y[k];
    s = 1.0 - s / (na[i] * nb[j]);
  }
  return sign * s;
}

// Put `key` (with `item`) into the ascending keys[0..t], whose slot t is free or its largest.
__device__ void insert_sorted(double* keys, long long* items, int t, double key, long long item) {
  while (t > 0 && keys[t - 1] > key) {
    keys[t] = keys[t - 1];
    items[t] = items[t - 1];
    --t;
  }
  keys[t] = key;
  items[t] = item;
}

// Row i's k cheapest columns, cheapest first (ties: the lower column). One thread per row.
template <typename T>
__global__ void nearest_columns(const T* a, const T* b, const double* na, const double* nb, long long n,
                                long long m, int d, int metric, double p, double sign, int k, long long* index,
                                double* cost) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i >= n) return;
  double* keys = cost + i * k;
  long long* items = index + i * k;
  for (int t = 0; t < k; ++t) {
    keys[t] = DLAP_INF;
    items[t] = -1;
  }
  double worst = DLAP_INF;
  for (long long j = 0; j < m; ++j) {
    double c = point_cost(a, b, na, nb, i, j, d, metric, p, sign);
    if (c < worst) {
      insert_sorted(keys, items, k - 1, c, j);
      worst = keys[k - 1];
    }
  }
}

// Pricing: row i's most negative reduced costs c - u_i - v_j below -(rtol (|c| + |u_i| + |v_j|) + atol),
// at most cap of them, and how many there were. One thread per row.
template <typename T>
__global__ void price(const T* a, const T* b, const double* na, const double* nb, long long n, long long m, int d,
                      int metric, double p, double sign, const double* u, const double* v, double rtol, double atol, int cap,
                      long long* index, double* reduced, long long* count) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i >= n) return;
  double* keys = reduced + i * cap;
  long long* items = index + i * cap;
  long long found = 0;
  double worst = 0.0, ui = u[i];
  for (long long j = 0; j < m; ++j) {
    double c = point_cost(a, b, na, nb, i, j, d, metric, p, sign);
    double r = c - ui - v[j];
    if (r < -(rtol * (fabs(c) + fabs(ui) + fabs(v[j])) + atol)) {
      if (found < cap) {
        insert_sorted(keys, items, (int)found, r, j);
      } else if (r < worst) {
        insert_sorted(keys, items, cap - 1, r, j);
      }
      ++found;
      worst = keys[(found < cap ? found : cap) - 1];
    }
  }
  count[i] = found;
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
