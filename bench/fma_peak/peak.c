/* The core's float32 FMA peak: CHAINS independent vector multiply-add chains (enough to cover
 * the FMA latency on two ports), the widest vectors the compiler targets (-march=native: zmm
 * with AVX-512, ymm with AVX2 + FMA). Prints the median GFLOP/s of 7 runs at one thread. */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__AVX512F__)
typedef __m512 vec;
#define SET1 _mm512_set1_ps
#define FMA _mm512_fmadd_ps
#define LANES 16
#define CHAINS 24
#define NAME "zmm"
#elif defined(__FMA__)
typedef __m256 vec;
#define SET1 _mm256_set1_ps
#define FMA _mm256_fmadd_ps
#define LANES 8
#define CHAINS 12
#define NAME "ymm"
#else
#error "needs FMA (compile with -march=native on an x86-64 CPU with FMA)"
#endif

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(void) {
    const long iters = 50000000;
    double runs[7];
    float sink = 0;
    for (int r = 0; r < 7; r++) {
        vec acc[CHAINS];
        vec a = SET1(0.999999f), b = SET1(1e-7f);
        for (int c = 0; c < CHAINS; c++) acc[c] = SET1((float)c);
        double t = now();
        for (long i = 0; i < iters; i++) {
#pragma GCC unroll 32
            for (int c = 0; c < CHAINS; c++) acc[c] = FMA(acc[c], a, b);
        }
        t = now() - t;
        float out[LANES];
        for (int c = 1; c < CHAINS; c++) acc[0] = FMA(acc[c], a, acc[0]);
        memcpy(out, &acc[0], sizeof out);
        sink += out[0];
        runs[r] = 2.0 * LANES * CHAINS * iters / t / 1e9;
    }
    qsort(runs, 7, sizeof(double), cmp);
    printf("fma peak: %.1f GFLOP/s (%s, %d chains, median of 7; best %.1f) %g\n", runs[3], NAME,
           CHAINS, runs[6], sink > 1e30 ? sink : 0.0);
    return 0;
}
