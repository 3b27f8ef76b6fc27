/* The elementwise part of one step of the mask-gated bigram RCNN, forward and backward, in
 * one pass over the state (models/native compiles and loads it; the matrix
 * products stay in PyTorch). The math and the layout are those of
 * models/encoders/recurrence.py (its _rcnn_forward and _rcnn_backward):
 *
 *   a = h_{t-1} U                          (given: one bmm before the call)
 *   r = sigmoid(-(W^l x_t + b^l + a)) = 1 - lambda_t
 *   d1 = r (W1 x_t - c1),  d2 = r (c1 + W2 x_t - c2),  u = tanh(c2 + d2 + b)
 *   c1 <- c1 + m d1,  c2 <- c2 + m d2,  h <- h + m (u - h)
 *
 * Shapes (float32, contiguous): P [D,T,B,3H], M [D,T,B], bias [D,H], out [D,T,B,H], and h
 * [D,B,H], the last step's state again, contiguous for the next product (as are a and gA_t);
 * the step buffers c1s, c2s, rs are [D,S,B,H] with step t in slot t % S (S = T when the
 * backward needs every step, 2 otherwise). A step works on the rows [first, first + count) of
 * the batch. sigmoid and tanh are vector_math.h's, which the compiler vectorizes.
 *
 * rcnn_forward_rows and rcnn_backward_rows run the whole time loop over some of the rows, the
 * products with U too, through the BLAS sgemm that PyTorch's library carries (given by its
 * address, with the call that sets the calling thread's BLAS threads): rows are independent,
 * so each part of them runs on its own thread (models/native/rcnn.py). */

#include <stdint.h>

#include "vector_math.h"

void rcnn_forward_step(int64_t D, int64_t T, int64_t B, int64_t H, int64_t S, int64_t t, int64_t first,
                       int64_t count, const float *a, const float *P, const float *M, const float *bias,
                       float *out, float *c1s, float *c2s, float *rs, float *hlast) {
    const unsigned int fp = denormals_flushed();
    for (int64_t d = 0; d < D; d++) {
        for (int64_t b = first; b < first + count; b++) {
            const float m = M[(d * T + t) * B + b];
            const float *ar = a + (d * B + b) * H;
            const float *p = P + ((d * T + t) * B + b) * 3 * H;
            const float *bb = bias + d * H;
            const int64_t now = ((d * S + t % S) * B + b) * H;
            const int64_t before = ((d * S + (t + S - 1) % S) * B + b) * H;
            const float *h0 = t > 0 ? out + ((d * T + t - 1) * B + b) * H : 0;
            float *h = out + ((d * T + t) * B + b) * H, *hl = hlast + (d * B + b) * H;
            float *c1 = c1s + now, *c2 = c2s + now, *rr = rs + now;
            const float *c10 = c1s + before, *c20 = c2s + before;
#pragma omp simd
            for (int64_t j = 0; j < H; j++) {
                const float c1p = t > 0 ? c10[j] : 0.0f, c2p = t > 0 ? c20[j] : 0.0f;
                const float hp = t > 0 ? h0[j] : 0.0f;
                const float r = sigmoid(-(p[j] + (t > 0 ? ar[j] : 0.0f)));
                const float d1 = r * (p[H + j] - c1p);
                const float d2 = r * (c1p + p[2 * H + j] - c2p);
                const float u = tanh_(c2p + d2 + bb[j]);
                c1[j] = c1p + m * d1;
                c2[j] = c2p + m * d2;
                h[j] = hl[j] = hp + m * (u - hp);
                rr[j] = r;
            }
        }
    }
    fp_restored(fp);
}

/* One reverse step. gh, gc1, gc2, gb [D,B,H] carry the gradients from the later steps (gb
 * sums the tanh argument's over steps); gout is the loss's gradient of out. Writes gP[:, t],
 * gM[:, t] ([D,T,B]) and gAt ([D,B,H], the gate's part of gP[:, t] again, contiguous for the
 * product with U), and leaves gh times (1 - m), to which the caller adds gAt U^T. */
void rcnn_backward_step(int64_t D, int64_t T, int64_t B, int64_t H, int64_t t, int64_t first, int64_t count,
                        const float *P, const float *M, const float *bias, const float *out,
                        const float *c1s, const float *c2s, const float *rs, const float *gout,
                        float *gh, float *gc1, float *gc2, float *gb, float *gP, float *gM, float *gAt) {
    const unsigned int fp = denormals_flushed();
    for (int64_t d = 0; d < D; d++) {
        for (int64_t b = first; b < first + count; b++) {
            const float m = M[(d * T + t) * B + b];
            const int64_t row = (d * B + b) * H;
            const int64_t now = ((d * T + t) * B + b) * H;
            const int64_t before = now - B * H;
            const float *p = P + ((d * T + t) * B + b) * 3 * H;
            float *gp = gP + ((d * T + t) * B + b) * 3 * H;
            const float *bb = bias + d * H;
            const float *r_ = rs + now, *go = gout + now;
            float *gat = gAt + row;
            float *gh_ = gh + row, *gc1_ = gc1 + row, *gc2_ = gc2 + row, *gb_ = gb + row;
            float gm = 0.0f;
#pragma omp simd reduction(+ : gm)
            for (int64_t j = 0; j < H; j++) {
                const float c1 = t > 0 ? c1s[before + j] : 0.0f, c2 = t > 0 ? c2s[before + j] : 0.0f;
                const float h = t > 0 ? out[before + j] : 0.0f;
                const float r = r_[j];
                const float g = gh_[j] + go[j];
                const float e1 = p[H + j] - c1;
                const float e2 = c1 + p[2 * H + j] - c2;
                const float u = tanh_(c2 + r * e2 + bb[j]);
                gm += g * (u - h) + r * (gc1_[j] * e1 + gc2_[j] * e2);
                const float gs = m * g * (1.0f - u * u);
                const float gd1 = m * gc1_[j];
                const float gd2 = gs + m * gc2_[j];
                const float gp1 = gd1 * r, gp2 = gd2 * r;
                gp[j] = gat[j] = (gd1 * e1 + gd2 * e2) * r * (r - 1.0f);
                gp[H + j] = gp1;
                gp[2 * H + j] = gp2;
                gb_[j] += gs;
                gc1_[j] += gp2 - gp1;
                gc2_[j] += gs - gp2;
                gh_[j] = g * (1.0f - m);
            }
            gM[(d * T + t) * B + b] = gm;
        }
    }
    fp_restored(fp);
}

/* Fortran BLAS sgemm (column-major; every integer passed as a pointer to an int64 below 2^31,
 * which a 32-bit-integer BLAS reads as the same number), and MKL's per-thread thread count. */
typedef void (*gemm_t)(const char *, const char *, const int64_t *, const int64_t *, const int64_t *, const float *,
                       const float *, const int64_t *, const float *, const int64_t *, const float *, float *,
                       const int64_t *);
typedef int (*local_threads_t)(const int64_t *);

/* The forward loop over rows [first, first + count): a = h_{t-1} U for each direction (one
 * sgemm: row-major a = h U is column-major a^T = U^T h^T), then the step. */
void rcnn_forward_rows(gemm_t gemm, local_threads_t local_threads, int64_t D, int64_t T, int64_t B, int64_t H,
                       int64_t S, int64_t first, int64_t count, const float *U, float *a, const float *P,
                       const float *M, const float *bias, float *out, float *c1s, float *c2s, float *rs,
                       float *hlast) {
    const int64_t one = 1;
    const int64_t before = local_threads(&one);
    const unsigned int fp = denormals_flushed();
    const float alpha = 1.0f, beta = 0.0f;
    for (int64_t t = 0; t < T; t++) {
        for (int64_t d = 0; d < D && t > 0; d++) {
            const int64_t row = (d * B + first) * H;
            gemm("N", "N", &H, &count, &H, &alpha, U + d * H * H, &H, hlast + row, &H, &beta, a + row, &H);
        }
        rcnn_forward_step(D, T, B, H, S, t, first, count, a, P, M, bias, out, c1s, c2s, rs, hlast);
    }
    fp_restored(fp);
    local_threads(&before);
}

/* The backward loop over rows [first, first + count): each reverse step, then gh += gAt U^T
 * (column-major gh^T += U gAt^T). */
void rcnn_backward_rows(gemm_t gemm, local_threads_t local_threads, int64_t D, int64_t T, int64_t B, int64_t H,
                        int64_t first, int64_t count, const float *U, const float *P, const float *M,
                        const float *bias, const float *out, const float *c1s, const float *c2s, const float *rs,
                        const float *gout, float *gh, float *gc1, float *gc2, float *gb, float *gP, float *gM,
                        float *gAt) {
    const int64_t one = 1;
    const int64_t before = local_threads(&one);
    const unsigned int fp = denormals_flushed();
    const float alpha = 1.0f, beta = 1.0f;
    for (int64_t t = T - 1; t >= 0; t--) {
        rcnn_backward_step(D, T, B, H, t, first, count, P, M, bias, out, c1s, c2s, rs, gout, gh, gc1, gc2, gb, gP,
                           gM, gAt);
        for (int64_t d = 0; d < D; d++) {
            const int64_t row = (d * B + first) * H;
            gemm("T", "N", &H, &count, &H, &alpha, U + d * H * H, &H, gAt + row, &H, &beta, gh + row, &H);
        }
    }
    fp_restored(fp);
    local_threads(&before);
}
