/* Dropout whose mask is a hash of each element's index and two keys (models/native/dropout.py):
 * element i is kept when mix(mix(lo(i) ^ k0) ^ hi(i) ^ k1) >= threshold (threshold = p 2^32),
 * and then scaled by 1 / (1 - p). mix is a 32-bit integer hash (two xor-shift-multiply rounds);
 * the same function of the same keys gives the same mask, so the backward applies it to the
 * gradient again instead of keeping the mask. One pass, vectorized. */

#include <stdint.h>

static inline uint32_t mix(uint32_t x) {
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    x ^= x >> 16;
    return x;
}

void hashed_dropout(int64_t n, int64_t k0, int64_t k1, int64_t threshold, float scale, const float *x, float *out) {
    const uint32_t a = (uint32_t)k0, b = (uint32_t)k1, limit = (uint32_t)threshold;
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        const uint32_t h = mix(mix((uint32_t)i ^ a) ^ (uint32_t)(i >> 32) ^ b);
        out[i] = h >= limit ? x[i] * scale : 0.0f;
    }
}
