/* exp, sigmoid and tanh that the compiler vectorizes (a loop calling libm's expf or tanhf
 * stays scalar): exp is a Cephes-style polynomial (about 1 ulp), tanh(x) = 2 sigmoid(2x) - 1
 * (within about 2e-7 of tanhf). Included by the compiled loops of this folder. */

#ifndef VECTOR_MATH_H
#define VECTOR_MATH_H

#include <stdint.h>

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

static inline float sigmoid(float x) { return 1.0f / (1.0f + exp_poly(-x)); }

static inline float tanh_(float x) { return 2.0f * sigmoid(2.0f * x) - 1.0f; }

#endif
