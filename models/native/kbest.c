/* The k-best semiring's sum (models/native/kbest.py): for each state, the R best of its two
 * candidates' value lists, each sorted best first, by one merge, and where each came from
 * (its place in the candidates side by side: i for a's i-th, R + i for b's i-th; a first on
 * ties), written straight into the table's slice, where PyTorch concatenates, takes the top R
 * and copies them back (one call per token of the chain). */

#include <stdint.h>

/* a, b, out: [J, N, R] with rows of N R contiguous values J apart by a_step, b_step, out_step
 * elements; pointer: [J, N, R] contiguous. */
void kmax_merge(int64_t J, int64_t N, int64_t R, const float *a, int64_t a_step, const float *b, int64_t b_step,
                float *out, int64_t out_step, int64_t *pointer) {
    for (int64_t j = 0; j < J; j++) {
        for (int64_t n = 0; n < N; n++) {
            const float *x = a + j * a_step + n * R, *y = b + j * b_step + n * R;
            float *o = out + j * out_step + n * R;
            int64_t *p = pointer + (j * N + n) * R;
            int64_t i = 0, k = 0;
            for (int64_t r = 0; r < R; r++) {
                if (k >= R || (i < R && x[i] >= y[k])) {
                    o[r] = x[i];
                    p[r] = i++;
                } else {
                    o[r] = y[k];
                    p[r] = R + k++;
                }
            }
        }
    }
}
