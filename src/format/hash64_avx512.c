/*
 * hash64_avx512.c — the integrity hash's word fold on AVX-512 (hash64.c
 * calls it when the CPU has AVX-512F and DQ, for spans of 64 words or more).
 *
 * The same terms as the portable fold, eight words at a time: word i
 * contributes fmix64(word) ^ (i * K), and the XOR of all contributions does
 * not depend on the order, so the result is the portable fold's bit for bit.
 * vpmullq does the two 64-bit products of fmix64 per lane, which makes the
 * hash about as fast as the memory that feeds it.
 */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "format/hash64_impl.h"

static inline __m512i fmix64x8(__m512i x) {
    const __m512i c1 = _mm512_set1_epi64((long long)CQ_HASH_M1), c2 = _mm512_set1_epi64((long long)CQ_HASH_M2);
    x = _mm512_xor_si512(x, _mm512_srli_epi64(x, 33));
    x = _mm512_mullo_epi64(x, c1);
    x = _mm512_xor_si512(x, _mm512_srli_epi64(x, 33));
    x = _mm512_mullo_epi64(x, c2);
    return _mm512_xor_si512(x, _mm512_srli_epi64(x, 33));
}

uint64_t cq_hash64_fold_avx512(const uint8_t *p, uint64_t nwords, uint64_t first) {
    const __m512i k = _mm512_set1_epi64((long long)CQ_HASH_K), k8 = _mm512_set1_epi64((long long)(8 * CQ_HASH_K));
    /* lane j of salt: (first + j) * K, wrapping as the portable code's products do */
    __m512i salt = _mm512_add_epi64(_mm512_set1_epi64((long long)(first * CQ_HASH_K)),
                                    _mm512_mullo_epi64(_mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0), k));
    __m512i a0 = _mm512_setzero_si512(), a1 = _mm512_setzero_si512();
    uint64_t i = 0;
    for (; i + 16 <= nwords; i += 16, p += 128) {
        const __m512i s1 = _mm512_add_epi64(salt, k8);
        a0 = _mm512_ternarylogic_epi64(a0, fmix64x8(_mm512_loadu_si512((const void *)p)), salt, 0x96);
        a1 = _mm512_ternarylogic_epi64(a1, fmix64x8(_mm512_loadu_si512((const void *)(p + 64))), s1, 0x96);
        salt = _mm512_add_epi64(s1, k8);
    }
    for (; i + 8 <= nwords; i += 8, p += 64) {
        a0 = _mm512_ternarylogic_epi64(a0, fmix64x8(_mm512_loadu_si512((const void *)p)), salt, 0x96);
        salt = _mm512_add_epi64(salt, k8);
    }
    uint64_t lanes[8], acc = 0;
    _mm512_storeu_si512((void *)lanes, _mm512_xor_si512(a0, a1));
    for (int j = 0; j < 8; j++) acc ^= lanes[j];
    return acc ^ cq_hash64_fold_scalar(p, nwords - i, first + i);
}
