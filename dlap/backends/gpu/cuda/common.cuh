// Device helpers shared by every kernel source of the GPU backend.
//
// kernels.py prepends this file (after the generated constants of dlap/backends/constants.py) to each .cu source before compiling it with NVRTC (so the
// kernel cache key covers it). Conventions, as in the CPU backend:
//   * cost matrices are row-major, n_rows <= n_cols, read in their own dtype T (int, long long,
//     float, double) and widened to double before any arithmetic: integer costs below 2**53 are
//     exact, and a 4-byte matrix moves 4 bytes per entry;
//   * duals, slacks and levels are double; vertex indices are int (n < 2**31); every offset into
//     the matrix is 64-bit (n * n passes 2**31 at n = 46341: HyLAC's classical solver is wrong
//     past that because of 32-bit offsets: docs/benchmarks.md);
//   * counters and scalars the host reads live in one control block `ctl` of 64-bit slots (CTL_*).

typedef unsigned long long u64;

#define DLAP_INF (__longlong_as_double(0x7ff0000000000000LL))

template <typename T>
__device__ __forceinline__ double widen(T x) { return static_cast<double>(x); }

// float32 subnormals are built exactly (mantissa * 2^-149) instead of converted: the conversion
// flushed them to zero on an H200 (--ftz=false did not help), so a cost of -1.95e-43 tied with 0.
__device__ __forceinline__ double widen(float x) {
    const int bits = __float_as_int(x);
    if ((bits & 0x7f800000) == 0) {
        const double m = static_cast<double>(bits & 0x007fffff) * 0x1p-149;
        return bits < 0 ? -m : m;
    }
    return static_cast<double>(x);
}

// The zero-slack test's bound on the rounding error of c - u - v: a few ulps of the operands, 0
// for integers (tol_scale = 0); no fixed epsilon (backends/cpu/hungarian.py's slack_tolerance is the same).
__device__ __forceinline__ double slack_tolerance(double c, double ui, double vj, double tol_scale) {
    return tol_scale * (fabs(c) + fabs(ui) + fabs(vj));
}

// Zero-slack test: exact for integers; for floats within slack_tolerance.
__device__ __forceinline__ bool zero_slack(double c, double ui, double vj, double tol_scale) {
    const double slack = c - ui - vj;
    return slack < DLAP_INF && slack <= slack_tolerance(c, ui, vj, tol_scale);
}

// Order-preserving map of doubles onto u64, so atomicMin/atomicMax on u64 order doubles of any
// sign (CUDA has no double atomicMin). unordered() inverts it.
__device__ __forceinline__ u64 ordered(double x) {
    u64 b = static_cast<u64>(__double_as_longlong(x));
    return (b >> 63) ? ~b : (b | 0x8000000000000000ULL);
}
__device__ __forceinline__ double unordered(u64 k) {
    return __longlong_as_double(static_cast<long long>((k >> 63) ? (k & 0x7fffffffffffffffULL) : ~k));
}

// Loads of data other blocks write during the same kernel: bypass the (incoherent) L1.
__device__ __forceinline__ double ld(const double* p) { return __ldcg(p); }
__device__ __forceinline__ int ld(const int* p) { return __ldcg(p); }
__device__ __forceinline__ u64 ld(const u64* p) { return __ldcg(reinterpret_cast<const unsigned long long*>(p)); }

__device__ __forceinline__ long long global_thread() {
    return static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ long long grid_threads() {
    return static_cast<long long>(gridDim.x) * blockDim.x;
}

// Minimum over the block; every thread gets it. `scratch` holds 32 doubles of shared memory.
__device__ __forceinline__ double block_min(double x, double* scratch) {
    for (int o = 16; o > 0; o >>= 1) x = fmin(x, __shfl_xor_sync(0xffffffffu, x, o));
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, n_warps = (blockDim.x + 31) >> 5;
    __syncthreads();  // scratch may still be read by a previous call
    if (lane == 0) scratch[warp] = x;
    __syncthreads();
    x = lane < n_warps ? scratch[lane] : DLAP_INF;
    for (int o = 16; o > 0; o >>= 1) x = fmin(x, __shfl_xor_sync(0xffffffffu, x, o));
    return x;
}

// Sum over the block; every thread gets it. `scratch` holds 32 long longs of shared memory.
__device__ __forceinline__ long long block_sum(long long x, long long* scratch) {
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, n_warps = (blockDim.x + 31) >> 5;
    __syncthreads();
    if (lane == 0) scratch[warp] = x;
    __syncthreads();
    x = lane < n_warps ? scratch[lane] : 0;
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

// Grid-wide barrier for the persistent (cooperatively launched, so co-resident) search kernels:
// the BFS and Dijkstra loops run on the device, with no host round trip per level (docs/design.md,
// "GPU: launches and syncs"). barrier[0] counts arrivals, barrier[1] is the generation. The
// fences before arriving and after leaving publish each block's writes to the others.
__device__ __forceinline__ void grid_sync(unsigned int* barrier) {
    __syncthreads();
    if (threadIdx.x == 0) {
        volatile unsigned int* generation = barrier + 1;
        const unsigned int seen = *generation;
        __threadfence();
        if (atomicAdd(barrier, 1u) == gridDim.x - 1) {
            atomicExch(barrier, 0u);
            __threadfence();
            atomicAdd(barrier + 1, 1u);
        } else {
            while (*generation == seen) __nanosleep(20);
        }
        __threadfence();
    }
    __syncthreads();
}
