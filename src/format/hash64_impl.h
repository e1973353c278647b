/*
 * hash64_impl.h — the integrity hash's constants and word folds, shared by
 * the portable code (hash64.c) and its AVX-512 variant (hash64_avx512.c).
 */
#ifndef CQ_HASH64_IMPL_H
#define CQ_HASH64_IMPL_H

#include <stdint.h>

#define CQ_HASH_K 0x9E3779B97F4A7C15ull  /* word i's salt: i * K */
#define CQ_HASH_M1 0xFF51AFD7ED558CCDull /* fmix64's multipliers */
#define CQ_HASH_M2 0xC4CEB9FE1A85EC53ull

/* The XOR of fmix64(word) ^ ((first + i) * K) over `nwords` little-endian words at p. */
uint64_t cq_hash64_fold_scalar(const uint8_t *p, uint64_t nwords, uint64_t first);
#if defined(CQ_ARCH_X86)
uint64_t cq_hash64_fold_avx512(const uint8_t *p, uint64_t nwords, uint64_t first); /* AVX-512F + DQ */
#endif

#endif
