/* The dependent HardKuma selector's sampling loop, forward and backward, one document row at
 * a time (models/native/hardkuma_scan.py loads it). The same math as
 * models/selectors/binary/dependent.py with HardKuma.rsample as the draw (Bastings et al. 2019,
 * section 6.1, eq. 16; eqs. 10a-10c):
 *
 *   theta_t = steps[t, :2] + h_{t-1} head_s                  (a, b = clamp(softplus(theta)))
 *   k = (1 - (1 - u)^(1/b))^(1/a),  z_t = m_t clamp(l + (r - l) k, 0, 1)
 *   p = steps[t, 2:] + z_t cell_z                            (the RCNN cell's input projection)
 *   lam = sigmoid(p_l + bias_l + h_{t-1} W),  c1' = p1 + lam (c1 - p1),
 *   c2' = q + lam (c2 - q) with q = c1 + p2,  h' = tanh(c2' + bias)
 *   s_t = s_{t-1} + m_t (s' - s_{t-1})                        for s in (c1, c2, h)
 *
 * Shapes (float32, contiguous): steps [B,T,2+3Z], head_s [Z,2], cell_z [3Z], W [Z,Z],
 * bias_l [Z], bias [Z], mask and u [B,T]; outputs z [B,T], theta [B,T,2]; kept for the
 * backward: the states after each step hs, c1s, c2s and the gates lams, each [B,T,Z]. */

#include <math.h>
#include <stdint.h>

#include "vector_math.h"

typedef struct {
    float low, high, a_min, a_max;
} Stretch;

static inline float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

static inline float softplus_grad(float x) { return x > 20.0f ? 1.0f : 1.0f / (1.0f + expf(-x)); }

static inline float clampf(float x, float lo, float hi) { return x < lo ? lo : (x > hi ? hi : x); }

static inline float log1mexp(float x) { return x > -0.69314718f ? logf(-expm1f(x)) : log1pf(-expf(x)); }

/* theta_t = steps[t, :2] + h_{t-1} head_s */
static inline void theta_of(int64_t Z, const float *s, const float *h, const float *head_s, float *th) {
    th[0] = s[0];
    th[1] = s[1];
    for (int64_t i = 0; i < Z; i++) {
        th[0] += h[i] * head_s[2 * i];
        th[1] += h[i] * head_s[2 * i + 1];
    }
}

/* The gated cell step from (h, c1, c2) into (hn, c1n, c2n), which may be the same arrays (each
 * index is read before it is written); the gates into lam when it is given. */
static inline void cell_step(int64_t Z, const float *s, float zt, float m, const float *cell_z, const float *W,
                             const float *bias_l, const float *bias, const float *h, const float *c1,
                             const float *c2, float *hn, float *c1n, float *c2n, float *lam) {
    float A[Z > 0 ? Z : 1];
    for (int64_t j = 0; j < Z; j++) A[j] = s[2 + j] + zt * cell_z[j] + bias_l[j];
    for (int64_t i = 0; i < Z; i++) {
        const float hi = h[i];
        for (int64_t j = 0; j < Z; j++) A[j] += hi * W[i * Z + j];
    }
    for (int64_t j = 0; j < Z; j++) {
        const float l = sigmoid(A[j]);
        const float p1 = s[2 + Z + j] + zt * cell_z[Z + j];
        const float q = c1[j] + s[2 + 2 * Z + j] + zt * cell_z[2 * Z + j];
        const float n1 = p1 + l * (c1[j] - p1);
        const float n2 = q + l * (c2[j] - q);
        const float nh = tanh_(n2 + bias[j]);
        if (lam) lam[j] = l;
        c1n[j] = c1[j] + m * (n1 - c1[j]);
        c2n[j] = c2[j] + m * (n2 - c2[j]);
        hn[j] = h[j] + m * (nh - h[j]);
    }
}

void hardkuma_forward(int64_t B, int64_t T, int64_t Z, float low, float high, float a_min, float a_max,
                      const float *steps, const float *head_s, const float *cell_z, const float *W,
                      const float *bias_l, const float *bias, const float *mask, const float *u,
                      float *z, float *theta, float *hs, float *c1s, float *c2s, float *lams) {
    const unsigned int fp = denormals_flushed();
    const int64_t G = 2 + 3 * Z;
    float zero[Z > 0 ? Z : 1];
    for (int64_t j = 0; j < Z; j++) zero[j] = 0.0f;
    for (int64_t b = 0; b < B; b++) {
        for (int64_t t = 0; t < T; t++) {
            const int64_t bt = b * T + t;
            const float *h = t > 0 ? hs + (bt - 1) * Z : zero;
            const float *c1 = t > 0 ? c1s + (bt - 1) * Z : zero;
            const float *c2 = t > 0 ? c2s + (bt - 1) * Z : zero;
            const float *s = steps + bt * G;
            const float m = mask[bt];
            float *th = theta + 2 * bt;
            theta_of(Z, s, h, head_s, th);
            const float a = clampf(softplus(th[0]), a_min, a_max), bb = clampf(softplus(th[1]), a_min, a_max);
            const float k = expf(log1mexp(log1pf(-u[bt]) / bb) / a);
            const float zt = clampf(low + (high - low) * k, 0.0f, 1.0f) * m;
            z[bt] = zt;
            cell_step(Z, s, zt, m, cell_z, W, bias_l, bias, h, c1, c2, hs + bt * Z, c1s + bt * Z, c2s + bt * Z,
                      lams + bt * Z);
        }
    }
    fp_restored(fp);
}

/* gz [B,T], gtheta [B,T,2]: the loss's gradients of z and theta. Writes gsteps [B,T,2+3Z] and
 * adds into ghead_s [Z,2], gcell_z [3Z], gW [Z,Z], gbias_l [Z], gbias [Z] (zeroed by the
 * caller). */
void hardkuma_backward(int64_t B, int64_t T, int64_t Z, float low, float high, float a_min, float a_max,
                       const float *steps, const float *head_s, const float *cell_z, const float *W,
                       const float *bias, const float *mask, const float *u, const float *z,
                       const float *theta, const float *hs, const float *c1s, const float *c2s,
                       const float *lams, const float *gz, const float *gtheta, float *gsteps,
                       float *ghead_s, float *gcell_z, float *gW, float *gbias_l, float *gbias) {
    const unsigned int fp = denormals_flushed();
    const int64_t G = 2 + 3 * Z;
    float zero[Z > 0 ? Z : 1];
    for (int64_t j = 0; j < Z; j++) zero[j] = 0.0f;
    float gh[Z > 0 ? Z : 1], gc1[Z > 0 ? Z : 1], gc2[Z > 0 ? Z : 1], gA[Z > 0 ? Z : 1];
    for (int64_t b = 0; b < B; b++) {
        for (int64_t j = 0; j < Z; j++) gh[j] = gc1[j] = gc2[j] = 0.0f;
        for (int64_t t = T - 1; t >= 0; t--) {
            const int64_t bt = b * T + t;
            const float *h = t > 0 ? hs + (bt - 1) * Z : zero;
            const float *c1 = t > 0 ? c1s + (bt - 1) * Z : zero;
            const float *c2 = t > 0 ? c2s + (bt - 1) * Z : zero;
            const float *s = steps + bt * G, *lam = lams + bt * Z;
            float *gs = gsteps + bt * G;
            const float m = mask[bt], zt = z[bt];
            float gzt = gz[bt];
            for (int64_t j = 0; j < Z; j++) {
                const float l = lam[j];
                const float p1 = s[2 + Z + j] + zt * cell_z[Z + j];
                const float q = c1[j] + s[2 + 2 * Z + j] + zt * cell_z[2 * Z + j];
                const float n2 = q + l * (c2[j] - q);
                const float nh = tanh_(n2 + bias[j]);
                const float gsum = m * gh[j] * (1.0f - nh * nh);
                const float g2 = m * gc2[j] + gsum, g1 = m * gc1[j];
                gbias[j] += gsum;
                const float gq = g2 * (1.0f - l);
                const float glam = g2 * (c2[j] - q) + g1 * (c1[j] - p1);
                const float gp1 = g1 * (1.0f - l);
                gA[j] = glam * l * (1.0f - l);
                gh[j] *= 1.0f - m;
                gc1[j] = (1.0f - m) * gc1[j] + g1 * l + gq;
                gc2[j] = (1.0f - m) * gc2[j] + g2 * l;
                gs[2 + j] = gA[j];
                gs[2 + Z + j] = gp1;
                gs[2 + 2 * Z + j] = gq;
                gbias_l[j] += gA[j];
                gzt += gA[j] * cell_z[j] + gp1 * cell_z[Z + j] + gq * cell_z[2 * Z + j];
                gcell_z[j] += zt * gA[j];
                gcell_z[Z + j] += zt * gp1;
                gcell_z[2 * Z + j] += zt * gq;
            }
            for (int64_t i = 0; i < Z; i++) {
                float acc = 0.0f;
                for (int64_t j = 0; j < Z; j++) {
                    acc += W[i * Z + j] * gA[j];
                    gW[i * Z + j] += h[i] * gA[j];
                }
                gh[i] += acc;
            }
            /* through the draw: z = m clamp(t, 0, 1), t = low + (high - low) k,
             * log k = L / a, L = log1mexp(x), x = log1p(-u) / b */
            const float th0 = theta[2 * bt], th1 = theta[2 * bt + 1];
            const float sp0 = softplus(th0), sp1 = softplus(th1);
            const float a = clampf(sp0, a_min, a_max), bb = clampf(sp1, a_min, a_max);
            const float x = log1pf(-u[bt]) / bb;
            const float logk = log1mexp(x) / a, k = expf(logk);
            const float tt = low + (high - low) * k;
            const float gt = (tt >= 0.0f && tt <= 1.0f) ? gzt * m : 0.0f;
            const float glogk = gt * (high - low) * k;
            const float ga = -glogk * logk / a;
            const float gx = glogk / a * (-1.0f / expm1f(-x));
            const float gb = -gx * x / bb;
            const float gth0 = gtheta[2 * bt] + (sp0 >= a_min && sp0 <= a_max ? ga * softplus_grad(th0) : 0.0f);
            const float gth1 = gtheta[2 * bt + 1] + (sp1 >= a_min && sp1 <= a_max ? gb * softplus_grad(th1) : 0.0f);
            gs[0] = gth0;
            gs[1] = gth1;
            for (int64_t i = 0; i < Z; i++) {
                gh[i] += head_s[2 * i] * gth0 + head_s[2 * i + 1] * gth1;
                ghead_s[2 * i] += h[i] * gth0;
                ghead_s[2 * i + 1] += h[i] * gth1;
            }
        }
    }
    fp_restored(fp);
}

/* The test-time loop (Bastings et al. 2019, section 5, "Deterministic predictions"): z_t the
 * most likely of 0, 1 and 0 < z < 1 under theta_t, the rectified mean in the last case,
 * ``int_0^1 P(H > h) dh = (high - low) sum_i w_i (1 - k_i^a)^b`` over the quadrature nodes
 * ``log_k`` [nodes] with weights ``w`` (HardKuma.mean); ``log_k01``: log of the stretched 0 and
 * 1. Writes z and P(z_t != 0) [B,T]. */
void hardkuma_decode(int64_t B, int64_t T, int64_t Z, float low, float high, float a_min, float a_max,
                     int64_t nodes, const float *log_k, const float *w, const float *log_k01,
                     const float *steps, const float *head_s, const float *cell_z, const float *W,
                     const float *bias_l, const float *bias, const float *mask, float *z, float *p_nonzero) {
    const unsigned int fp = denormals_flushed();
    const int64_t G = 2 + 3 * Z;
    float h[Z > 0 ? Z : 1], c1[Z > 0 ? Z : 1], c2[Z > 0 ? Z : 1];
    for (int64_t b = 0; b < B; b++) {
        for (int64_t j = 0; j < Z; j++) h[j] = c1[j] = c2[j] = 0.0f;
        for (int64_t t = 0; t < T; t++) {
            const int64_t bt = b * T + t;
            const float *s = steps + bt * G;
            const float m = mask[bt];
            float th[2];
            theta_of(Z, s, h, head_s, th);
            const float a = clampf(softplus(th[0]), a_min, a_max), bb = clampf(softplus(th[1]), a_min, a_max);
            const float log_nonzero = bb * log1mexp(a * log_k01[0]);
            const float p0 = expf(log1mexp(log_nonzero)), nonzero = expf(log_nonzero);
            const float p1 = expf(bb * log1mexp(a * log_k01[1]));
            const float pc = nonzero - p1 > 0.0f ? nonzero - p1 : 0.0f;
            float zt = 1.0f;
            if (p0 >= p1 && p0 >= pc) {
                zt = 0.0f;
            } else if (p1 < pc) {
                /* the survival (1 - k^a)^b at the quadrature's nodes, vectorized (libm's
                 * scalar calls here cost microseconds per token) */
                float mean = 0.0f;
#pragma omp simd reduction(+ : mean)
                for (int64_t i = 0; i < nodes; i++) mean += exp_poly(bb * log_poly(one_minus_exp(a * log_k[i]))) * w[i];
                zt = (high - low) * mean;
            }
            zt *= m;
            z[bt] = zt;
            p_nonzero[bt] = nonzero;
            cell_step(Z, s, zt, m, cell_z, W, bias_l, bias, h, c1, c2, h, c1, c2, 0);
        }
    }
    fp_restored(fp);
}
