/* exp, log, 1 - exp, sigmoid and tanh that the compiler vectorizes (a loop calling libm's
 * expf or tanhf stays scalar): exp and log are Cephes-style polynomials (about 1 ulp),
 * tanh(x) = 2 sigmoid(2x) - 1 (within about 2e-7 of tanhf). And denormals_flushed / fp_restored: a loop runs with denormal
 * floats flushed to zero (x86's FTZ and DAZ), then the thread's setting comes back; gradients
 * carried back over hundreds of steps shrink to denormals, on which each operation takes some
 * hundred cycles. Included by the compiled loops of this folder. */

#ifndef VECTOR_MATH_H
#define VECTOR_MATH_H

#include <stdint.h>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>

static inline unsigned int denormals_flushed(void) {
    const unsigned int before = _mm_getcsr();
    _mm_setcsr(before | 0x8040u); /* flush to zero (bit 15), denormal operands are zero (bit 6) */
    return before;
}

static inline void fp_restored(unsigned int before) { _mm_setcsr(before); }
#else
static inline unsigned int denormals_flushed(void) { return 0; }

static inline void fp_restored(unsigned int before) { (void)before; }
#endif

static inline float exp_poly(float x) {
    x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
    float n = __builtin_floorf(x * 1.44269504088896341f + 0.5f);
    float r = x - n * 0.693359375f + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    union { int32_t i; float f; } scale;
    scale.i = ((int32_t)n + 127) << 23;
    return p * scale.f;
}

/* log x for a positive normal x (Cephes' logf polynomial, about 1 ulp; 0 and denormals give
 * about -87.3, whose uses here only ever exponentiate it back to about 0) */
static inline float log_poly(float x) {
    union { float f; int32_t i; } bits = {x};
    float e = (float)(((bits.i >> 23) & 0xff) - 126);
    bits.i = (bits.i & 0x007fffff) | 0x3f000000; /* the mantissa in [0.5, 1) */
    float m = bits.f;
    if (m < 0.70710678f) {
        e -= 1.0f;
        m = m + m - 1.0f;
    } else {
        m = m - 1.0f;
    }
    const float z = m * m;
    float y = 7.0376836292e-2f;
    y = y * m - 1.1514610310e-1f;
    y = y * m + 1.1676998740e-1f;
    y = y * m - 1.2420140846e-1f;
    y = y * m + 1.4249322787e-1f;
    y = y * m - 1.6668057665e-1f;
    y = y * m + 2.0000714765e-1f;
    y = y * m - 2.4999993993e-1f;
    y = y * m + 3.3333331174e-1f;
    y = y * m * z - 2.12194440e-4f * e - 0.5f * z;
    return m + y + 0.693359375f * e;
}

/* 1 - e^x for x <= 0, to a relative error of about 1e-7: -expm1(x) by its series near 0
 * (|x| <= log 2; the error of stopping at x^10 is under 1e-8 of it), 1 - e^x below */
static inline float one_minus_exp(float x) {
    float s = 1.0f + x / 10.0f;
    s = 1.0f + x / 9.0f * s;
    s = 1.0f + x / 8.0f * s;
    s = 1.0f + x / 7.0f * s;
    s = 1.0f + x / 6.0f * s;
    s = 1.0f + x / 5.0f * s;
    s = 1.0f + x / 4.0f * s;
    s = 1.0f + x / 3.0f * s;
    s = 1.0f + x / 2.0f * s;
    return x > -0.69314718f ? -x * s : 1.0f - exp_poly(x);
}

static inline float sigmoid(float x) { return 1.0f / (1.0f + exp_poly(-x)); }

static inline float tanh_(float x) { return 2.0f * sigmoid(2.0f * x) - 1.0f; }

#endif
