/* The depthwise direct loops' inner step (direct_convolution.pyx), 16 output channels of a window
 * wholly inside the input:
 *
 *     sums[l] = start[l] + sum over taps t of pixels[offsets[t] + l] * (int16_t)weights[t * step + l]
 *
 * with the raw 8-bit codes (the caller's ``start`` holds the bias minus the input zero point times
 * the filter's sum) and each weight, a centred 16-bit value, in the low half of an int32 whose high
 * half is 0. That layout lets pmaddwd multiply a code widened to 32 bits by its weight in one
 * instruction: it sums the products of the 16-bit halves, code * weight + (0 or -1) * 0, exactly.
 * An int32 multiply (pmulld) is two instructions on x86-64, and compilers do not find pmaddwd in
 * the plain loop, which is the fallback (the same exact sums). */
#ifndef DML_EP_DEPTHWISE_TAPS_H
#define DML_EP_DEPTHWISE_TAPS_H

#include <stddef.h>
#include <stdint.h>
#if defined(__AVX512BW__) || defined(__AVX2__)
#include <immintrin.h>
#endif

#if defined(__AVX512BW__)
#define DML_TAPS16(name, code, widen)                                                                                   \
    static void name(int32_t *sums, const int32_t *start, const code *pixels, const ptrdiff_t *offsets,          \
                            const int32_t *weights, ptrdiff_t step, ptrdiff_t taps)                                     \
    {                                                                                                                   \
        __m512i s = _mm512_loadu_si512((const void *)start);                                                            \
        ptrdiff_t t;                                                                                                    \
        for (t = 0; t < taps; t++)                                                                                      \
            s = _mm512_add_epi32(s, _mm512_madd_epi16(widen(_mm_loadu_si128((const __m128i *)(pixels + offsets[t]))),  \
                                                      _mm512_loadu_si512((const void *)(weights + t * step))));         \
        _mm512_storeu_si512((void *)sums, s);                                                                           \
    }
DML_TAPS16(dml_taps16_uint8, uint8_t, _mm512_cvtepu8_epi32)
DML_TAPS16(dml_taps16_int8, int8_t, _mm512_cvtepi8_epi32)
#elif defined(__AVX2__)
#define DML_TAPS16(name, code, widen)                                                                                   \
    static void name(int32_t *sums, const int32_t *start, const code *pixels, const ptrdiff_t *offsets,          \
                            const int32_t *weights, ptrdiff_t step, ptrdiff_t taps)                                     \
    {                                                                                                                   \
        __m256i s0 = _mm256_loadu_si256((const __m256i *)start), s1 = _mm256_loadu_si256((const __m256i *)(start + 8)); \
        ptrdiff_t t;                                                                                                    \
        for (t = 0; t < taps; t++) {                                                                                    \
            const code *p = pixels + offsets[t];                                                                        \
            const int32_t *w = weights + t * step;                                                                      \
            s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(widen(_mm_loadl_epi64((const __m128i *)p)),                    \
                                                        _mm256_loadu_si256((const __m256i *)w)));                       \
            s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(widen(_mm_loadl_epi64((const __m128i *)(p + 8))),              \
                                                        _mm256_loadu_si256((const __m256i *)(w + 8))));                 \
        }                                                                                                               \
        _mm256_storeu_si256((__m256i *)sums, s0);                                                                       \
        _mm256_storeu_si256((__m256i *)(sums + 8), s1);                                                                 \
    }
DML_TAPS16(dml_taps16_uint8, uint8_t, _mm256_cvtepu8_epi32)
DML_TAPS16(dml_taps16_int8, int8_t, _mm256_cvtepi8_epi32)
#else
#define DML_TAPS16(name, code)                                                                                          \
    static void name(int32_t *sums, const int32_t *start, const code *pixels, const ptrdiff_t *offsets,          \
                            const int32_t *weights, ptrdiff_t step, ptrdiff_t taps)                                     \
    {                                                                                                                   \
        int32_t s[16];                                                                                                  \
        ptrdiff_t t;                                                                                                    \
        int l;                                                                                                          \
        for (l = 0; l < 16; l++)                                                                                        \
            s[l] = start[l];                                                                                            \
        for (t = 0; t < taps; t++)                                                                                      \
            for (l = 0; l < 16; l++)                                                                                    \
                s[l] += (int32_t)pixels[offsets[t] + l] * (int16_t)weights[t * step + l];                               \
        for (l = 0; l < 16; l++)                                                                                        \
            sums[l] = s[l];                                                                                             \
    }
DML_TAPS16(dml_taps16_uint8, uint8_t)
DML_TAPS16(dml_taps16_int8, int8_t)
#endif

#endif
