/* The prox of 1-d total variation by the taut string, row by row (models/native/tv_prox.py
 * loads it): the same steps, in the same order and in float64, as tv_prox_row of
 * models/prox.py (Niculae & Blondel 2017, section 3.2; Davies & Kovac 2001). The string is
 * the shortest path from (0, 0) to (n, S_n) within lam of the cumulative sums S_k; its slopes
 * are the result, and each straight piece is a group (the Jacobian averages over it).
 *
 * x [rows, T]: each row's n = lengths[row] values first (the rest is not read); writes y and
 * groups over the same first n positions of each row. work: 3 (T + 1) doubles of the caller's,
 * for the cumulative sums and the tube's two walls. */

#include <math.h>
#include <stdint.h>

void tv_prox_rows(int64_t rows, int64_t T, double lam, const double *x, const int64_t *lengths, double *y,
                  int64_t *groups, double *work) {
    double *cumulative = work, *upper = cumulative + T + 1, *lower = upper + T + 1;
    for (int64_t row = 0; row < rows; row++) {
        const int64_t n = lengths[row];
        const double *xr = x + row * T;
        double *yr = y + row * T;
        int64_t *gr = groups + row * T;
        if (n == 0) continue;
        cumulative[0] = 0.0;
        for (int64_t i = 0; i < n; i++) cumulative[i + 1] = cumulative[i] + xr[i];
        for (int64_t k = 0; k <= n; k++) {
            upper[k] = cumulative[k] + lam;
            lower[k] = cumulative[k] - lam;
        }
        upper[0] = lower[0] = 0.0;
        upper[n] = lower[n] = cumulative[n];
        int64_t start = 0, group = 0;
        double height = 0.0;
        while (start < n) {
            double lo = -INFINITY, hi = INFINITY, slope = 0.0;
            int64_t at_lo = start, at_hi = start, end = n, pinned = 1;
            for (int64_t j = start + 1; j <= n; j++) {
                const double need_lo = (lower[j] - height) / (double)(j - start);
                const double need_hi = (upper[j] - height) / (double)(j - start);
                if (need_lo > hi) { /* the string touches the upper wall at at_hi */
                    end = at_hi, slope = hi, height = upper[at_hi], pinned = 0;
                    break;
                }
                if (need_hi < lo) { /* ... or the lower wall at at_lo */
                    end = at_lo, slope = lo, height = lower[at_lo], pinned = 0;
                    break;
                }
                if (need_lo >= lo) lo = need_lo, at_lo = j;
                if (need_hi <= hi) hi = need_hi, at_hi = j;
            }
            if (pinned) slope = (cumulative[n] - height) / (double)(n - start); /* a straight line to the end */
            for (int64_t i = start; i < end; i++) yr[i] = slope, gr[i] = group;
            start = end, group++;
        }
    }
}
