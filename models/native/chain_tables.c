/* The log-semiring loops of the k-subset chain program (models/distributions/chain_dp.py):
 * the forward and backward tables and the prefix and suffix expectations, one token at a
 * time, each step one pass over the counts and rows (PyTorch runs several small operations
 * per token). The math and the layout are chain_dp.py's, which these stand in for:
 *
 *   tables [T+1, K2, A, B] float32 (K2 = K + 2 counts with a guard row, A = 1 or 2 bits of
 *   the token before, B rows innermost), u, w [T, B]; wu = w + u; the caller fills the
 *   starting values (NEG or 0) and the guard rows, which stay as they are.
 *
 * Rows are independent: each call works on the rows [first, first + count) (the caller
 * shares them out over threads). log(e^a + e^b) is max + log1p(e^-|a - b|), with
 * vector_math.h's exp and log, so the loops over rows vectorize. */

#include <stdint.h>

#include "vector_math.h"

static inline float log1p_(float x) { /* log(1 + x) for x in [0, 1], corrected for the rounding of 1 + x */
    const float u = 1.0f + x;
    return u == 1.0f ? x : log_poly(u) * (x / (u - 1.0f));
}

static inline float logaddexp_(float a, float b) {
    const float m = a > b ? a : b, d = a > b ? b - a : a - b;
    return m + log1p_(exp_poly(d));
}

#define AT(i, j, a) ((((i) * K2 + (j)) * A + (a)) * B)

void chain_forward(int64_t T, int64_t K2, int64_t A, int64_t B, int64_t first, int64_t count, const float *u,
                   const float *wu, float *alpha) {
    for (int64_t i = 0; i < T; i++) {
        const float *ui = u + i * B, *wui = wu ? wu + i * B : 0;
        for (int64_t j = 1; j < K2; j++) {
            if (A == 1) {
                const float *same = alpha + AT(i, j, 0), *less = alpha + AT(i, j - 1, 0);
                float *out = alpha + AT(i + 1, j, 0);
#pragma omp simd
                for (int64_t b = first; b < first + count; b++) out[b] = logaddexp_(same[b], less[b] + ui[b]);
            } else {
                const float *same0 = alpha + AT(i, j, 0), *same1 = alpha + AT(i, j, 1);
                const float *less0 = alpha + AT(i, j - 1, 0), *less1 = alpha + AT(i, j - 1, 1);
                float *off = alpha + AT(i + 1, j, 0), *on = alpha + AT(i + 1, j, 1);
#pragma omp simd
                for (int64_t b = first; b < first + count; b++) {
                    off[b] = logaddexp_(same0[b], same1[b]);
                    on[b] = logaddexp_(less0[b] + ui[b], less1[b] + wui[b]);
                }
            }
        }
    }
}

void chain_backward(int64_t T, int64_t K2, int64_t A, int64_t B, int64_t first, int64_t count, const float *u,
                    const float *w, float *beta) {
    for (int64_t i = T - 1; i >= 0; i--) {
        const float *ui = u + i * B, *wi = w ? w + i * B : 0;
        for (int64_t j = 0; j < K2 - 1; j++) {
            const float *off = beta + AT(i + 1, j, 0), *more = beta + AT(i + 1, j + 1, A - 1);
            float *out0 = beta + AT(i, j, 0), *out1 = beta + AT(i, j, A - 1);
#pragma omp simd
            for (int64_t b = first; b < first + count; b++) {
                const float on = more[b] + ui[b];
                out0[b] = logaddexp_(off[b], on);
                if (A == 2) out1[b] = logaddexp_(off[b], on + wi[b]);
            }
        }
    }
}

/* p0, p1 [T, K2-1, B]: A = 1, p0 = P(token on | count after it); A = 2, p0 and p1 = from
 * bit 0 off and on (chain_dp.prefix_expectations' names) */
void chain_prefix(int64_t T, int64_t K2, int64_t A, int64_t B, int64_t first, int64_t count, const float *p0,
                  const float *p1, const float *g, float *ra) {
    for (int64_t i = 0; i < T; i++) {
        const float *gi = g + i * B;
        for (int64_t j = 0; j < K2 - 1; j++) {
            const float *q0 = p0 + (i * (K2 - 1) + j) * B;
            if (A == 1) {
                const float *same = ra + AT(i, j + 1, 0), *less = ra + AT(i, j, 0);
                float *out = ra + AT(i + 1, j + 1, 0);
#pragma omp simd
                for (int64_t b = first; b < first + count; b++) out[b] = same[b] + q0[b] * (less[b] + gi[b] - same[b]);
            } else {
                const float *q1 = p1 + (i * (K2 - 1) + j) * B;
                const float *here0 = ra + AT(i, j + 1, 0), *here1 = ra + AT(i, j + 1, 1);
                const float *less0 = ra + AT(i, j, 0), *less1 = ra + AT(i, j, 1);
                float *off = ra + AT(i + 1, j + 1, 0), *on = ra + AT(i + 1, j + 1, 1);
#pragma omp simd
                for (int64_t b = first; b < first + count; b++) {
                    off[b] = here1[b] + q0[b] * (here0[b] - here1[b]);
                    on[b] = (less1[b] + gi[b]) + q1[b] * (less0[b] - less1[b]);
                }
            }
        }
    }
}

/* goes_on [T, K2-1, A, B] */
void chain_suffix(int64_t T, int64_t K2, int64_t A, int64_t B, int64_t first, int64_t count, const float *goes_on,
                  const float *g, float *rb) {
    for (int64_t i = T - 1; i >= 0; i--) {
        const float *gi = g + i * B;
        for (int64_t j = 0; j < K2 - 1; j++) {
            const float *off = rb + AT(i + 1, j, 0), *on = rb + AT(i + 1, j + 1, A - 1);
            for (int64_t a = 0; a < A; a++) {
                const float *p = goes_on + ((i * (K2 - 1) + j) * A + a) * B;
                float *out = rb + AT(i, j, a);
#pragma omp simd
                for (int64_t b = first; b < first + count; b++) out[b] = off[b] + p[b] * (on[b] + gi[b] - off[b]);
            }
        }
    }
}
