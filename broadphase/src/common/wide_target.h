// What the AVX-512 code paths (the 16-lane cell sweeps, the pair router's
// split) are compiled with: a target attribute per function, so that the
// build's baseline stays x86-64-v3 and the wide code runs only where
// wide::available() says the CPU has it.
#pragma once

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define BP_HAVE_WIDE_KERNEL 1
#include <immintrin.h>

#define BP_WIDE_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,popcnt")))
// For a lambda inside a wide function: it does not inherit the target, and it
// must be inlined to keep the captured windows in registers (called instead,
// measurably slower: docs/decisions.md, "The cell kernels").
#define BP_WIDE_LAMBDA \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,popcnt"), always_inline))
#endif

// GCC 12's AVX-512 headers pass _mm512_undefined_epi32() as the unused source
// of unmasked intrinsics, which -Wmaybe-uninitialized reports at every call
// site (-Wuninitialized where the call is in a lambda); nothing here reads
// an undefined lane.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
