/* An encoder's first layer at inference from each word's products (models/native/token_rows.py):
 * the words' rows of (embeddings @ W), times each position's gate, gathered where the layer reads
 * them and finished in the same pass (bias, ReLU, padding mask, max-pooling for a convolution;
 * bias for the recurrent input projections), instead of one pass per operation over [B, T, .]. */

#include <stdint.h>
#include <string.h>

/* Rows [first, first + count) of a width-K convolution ('same' padding, K odd):
 *   out_{b,t} = relu(sum_{j : scale_{b,s} != 0} scale_{b,s} table[source_{b,s} K + j] + bias) real_{b,t},
 * s = t + j - K / 2 inside [0, T). table: [rows * K, O] (row u K + j: word u's tap j); source,
 * scale, real: [B, T]. states [B, T, O] (NULL: not written), summary [B, O] (NULL: not
 * written): max over t of out_{b,t} (out >= 0, so it starts from 0). */
void token_conv(int64_t first, int64_t count, int64_t T, int64_t K, int64_t O, const float *table,
                const int64_t *source, const float *scale, const float *real, const float *bias,
                float *states, float *summary) {
    float scratch[states ? 1 : O];
    for (int64_t b = first; b < first + count; b++) {
        float *pooled = summary ? summary + b * O : NULL;
        if (pooled) memset(pooled, 0, sizeof(float) * O);
        for (int64_t t = 0; t < T; t++) {
            float *out = states ? states + (b * T + t) * O : scratch;
            const float keep = real[b * T + t];
            int any = 0;
            for (int64_t j = 0; j < K; j++) {
                const int64_t s = t + j - K / 2;
                if (s < 0 || s >= T) continue;
                const float w = scale[b * T + s];
                if (w == 0.0f) continue;
                const float *row = table + (source[b * T + s] * K + j) * O;
                if (any) {
#pragma omp simd
                    for (int64_t o = 0; o < O; o++) out[o] += w * row[o];
                } else {
#pragma omp simd
                    for (int64_t o = 0; o < O; o++) out[o] = w * row[o];
                    any = 1;
                }
            }
            if (!any) memset(out, 0, sizeof(float) * O);
#pragma omp simd
            for (int64_t o = 0; o < O; o++) {
                const float v = out[o] + bias[o];
                out[o] = (v > 0.0f ? v : 0.0f) * keep;
            }
            if (pooled) {
#pragma omp simd
                for (int64_t o = 0; o < O; o++) pooled[o] = out[o] > pooled[o] ? out[o] : pooled[o];
            }
        }
    }
}

/* Steps [first, first + count) of the recurrent input projections P [D, T, B, G]:
 *   P_{d,t,b} = products[rows_{b,s}, d G : (d + 1) G] scale_{b,s} + bias_d,
 * s = t for direction 0 and T - 1 - t for direction 1 (it reads the sequence reversed);
 * products: [rows, D G]; rows, scale: [B, T] (scale NULL: every gate is 1). */
void token_projections(int64_t first, int64_t count, int64_t D, int64_t T, int64_t B, int64_t G,
                       const float *products, const int64_t *rows, const float *scale, const float *bias,
                       float *P) {
    for (int64_t d = 0; d < D; d++) {
        for (int64_t t = first; t < first + count; t++) {
            const int64_t s = d == 0 ? t : T - 1 - t;
            for (int64_t b = 0; b < B; b++) {
                const float *row = products + rows[b * T + s] * D * G + d * G;
                const float *add = bias + d * G;
                float *out = P + ((d * T + t) * B + b) * G;
                if (scale) {
                    const float w = scale[b * T + s];
#pragma omp simd
                    for (int64_t g = 0; g < G; g++) out[g] = row[g] * w + add[g];
                } else {
#pragma omp simd
                    for (int64_t g = 0; g < G; g++) out[g] = row[g] + add[g];
                }
            }
        }
    }
}
