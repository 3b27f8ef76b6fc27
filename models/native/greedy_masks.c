/* SparseMAP's starting support (models/distributions/sparsemap.py: greedy_masks), one row at a
 * time: marginals mu in [0, 1] written as masks of `size` ones (or one fewer) and weights.
 *
 * Each row: a slack entry of size - sum(mu) is appended; then each step takes the `size`
 * largest entries still left (ties to the lower index, as a stable descending sort does) with
 * the largest weight that keeps the rest a mixture of such masks, subtracts it from them, and
 * stops when the weight left to place is at most tol. The order of the entries changes little
 * from one step to the next, so it is sorted once and then kept in order by moving the
 * entries a step lowered back into place.
 *
 * greedy_steps counts each row's steps (rows run for the batch's largest count, later steps
 * with weight 0); greedy_masks writes them: masks [B, S, T] and weights [B, S] (unnormalized),
 * for S at least the largest count. */

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

static int before(const double *rest, int64_t a, int64_t b) { /* a sorts before b */
    return rest[a] > rest[b] || (rest[a] == rest[b] && a < b);
}

/* order[0..L) sorted by before(), bottom-up merges through spare[0..L) */
static void sort(const double *rest, int64_t *order, int64_t *spare, int64_t L) {
    for (int64_t width = 1; width < L; width *= 2) {
        for (int64_t low = 0; low < L; low += 2 * width) {
            const int64_t middle = low + width < L ? low + width : L, high = low + 2 * width < L ? low + 2 * width : L;
            int64_t a = low, b = middle, k = low;
            while (a < middle && b < high) spare[k++] = before(rest, order[b], order[a]) ? order[b++] : order[a++];
            while (a < middle) spare[k++] = order[a++];
            while (b < high) spare[k++] = order[b++];
        }
        for (int64_t i = 0; i < L; i++) order[i] = spare[i];
    }
}

/* One row: returns its number of steps; writes them when write is set. The first `in`
 * entries of the order are the step's mask; a step lowers each of them by the same amount,
 * so only they can fall behind the entries after them: each is moved back into place. */
static int64_t row(int64_t T, double tol, const double *mu, double total, double *rest, int64_t *order,
                   int64_t *spare, double *masks, double *weights, int write) {
    const int64_t L = T + 1;
    const double size = fmax(ceil(total - tol), 0.0);
    const int64_t in = size < (double)L ? (int64_t)size : L;
    for (int64_t i = 0; i < T; i++) rest[i] = mu[i];
    rest[T] = fmax(size - total, 0.0);
    for (int64_t i = 0; i < L; i++) order[i] = i;
    sort(rest, order, spare, L);
    double left = 1.0;
    int64_t steps = 0;
    for (int64_t s = 0; s < T + 2 && left > tol; s++) {
        const double lowest_in = in > 0 ? rest[order[in - 1]] : INFINITY;
        const double highest_out = fmax(in < L ? rest[order[in]] : -INFINITY, 0.0);
        const double step = fmin(fmax(fmin(lowest_in, left - highest_out), 0.0), left);
        for (int64_t i = 0; i < in; i++) {
            const int64_t k = order[i];
            if (write && step > 0 && k < T) masks[s * T + k] = 1.0;
            rest[k] = fmax(rest[k] - step, 0.0);
        }
        for (int64_t i = in - 1; i >= 0; i--) { /* the mask's entries back into place */
            const int64_t v = order[i];
            int64_t j = i;
            while (j + 1 < L && before(rest, order[j + 1], v)) {
                order[j] = order[j + 1];
                j++;
            }
            order[j] = v;
        }
        left -= step;
        if (write) weights[s] = step;
        steps++;
    }
    return steps;
}

void greedy_steps(int64_t B, int64_t T, double tol, const double *mu, const double *totals, int64_t *steps) {
    double *rest = malloc((T + 1) * sizeof(double));
    int64_t *order = malloc(2 * (T + 1) * sizeof(int64_t));
    for (int64_t b = 0; b < B; b++)
        steps[b] = row(T, tol, mu + b * T, totals[b], rest, order, order + T + 1, 0, 0, 0);
    free(rest);
    free(order);
}

void greedy_masks(int64_t B, int64_t T, int64_t S, double tol, const double *mu, const double *totals,
                  double *masks, double *weights) {
    double *rest = malloc((T + 1) * sizeof(double));
    int64_t *order = malloc(2 * (T + 1) * sizeof(int64_t));
    for (int64_t b = 0; b < B; b++)
        row(T, tol, mu + b * T, totals[b], rest, order, order + T + 1, masks + b * S * T, weights + b * S, 1);
    free(rest);
    free(order);
}

/* The budget projection that comes before (sparsemap.py: budget_projection), one row at a
 * time: mu = clip(s - tau, 0, 1) over the row's real entries (mask > 0; 0 elsewhere), tau in
 * [0, max(0, max s)] by `steps` bisections, the least that keeps sum mu within the budget. */
void budget_projection(int64_t B, int64_t T, int64_t steps, const double *scores, const double *mask,
                       const double *budgets, double *mu) {
    for (int64_t b = 0; b < B; b++) {
        const double *s = scores + b * T, *m = mask + b * T;
        double low = 0.0, high = 0.0;
        for (int64_t t = 0; t < T; t++)
            if (m[t] > 0 && s[t] > high) high = s[t];
        for (int64_t i = 0; i < steps; i++) {
            const double middle = (low + high) / 2;
            double sum = 0.0;
            for (int64_t t = 0; t < T; t++) {
                const double x = s[t] - middle;
                if (m[t] > 0 && x > 0) sum += x < 1 ? x : 1;
            }
            if (sum > budgets[b]) low = middle;
            else high = middle;
        }
        for (int64_t t = 0; t < T; t++) {
            const double x = s[t] - high;
            mu[b * T + t] = m[t] > 0 && x > 0 ? (x < 1 ? x : 1) : 0.0;
        }
    }
}
