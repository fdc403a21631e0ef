#include "bench/peers/fma_peak.h"

#include <immintrin.h>

#include <chrono>
#include <cstdio>

namespace fusion::peers {
namespace {

constexpr int kAcc = 12;
constexpr long kInner = 1 << 16;  // FMAs per accumulator per timing check

// Returns the sum of the accumulators so the loop cannot be optimised away.
__attribute__((target("avx2,fma"))) float FmaBurst(long rounds) {
  __m256 acc[kAcc];
  for (int i = 0; i < kAcc; ++i) acc[i] = _mm256_set1_ps(0.001f * i);
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (long r = 0; r < rounds; ++r) {
    for (long j = 0; j < kInner; ++j) {
#pragma GCC unroll 12
      for (int i = 0; i < kAcc; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
    }
    __asm__ volatile("" : : : "memory");
  }
  __m256 s = acc[0];
  for (int i = 1; i < kAcc; ++i) s = _mm256_add_ps(s, acc[i]);
  alignas(32) float v[8];
  _mm256_store_ps(v, s);
  return v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
}

}  // namespace

double MeasureFmaPeakGflops(double seconds) {
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return 0;
  FmaBurst(4);  // warm up (clock ramp)
  double best = 0;
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  volatile float sink = 0;
  while (std::chrono::steady_clock::now() < end) {
    const long rounds = 16;
    const auto t0 = std::chrono::steady_clock::now();
    sink = sink + FmaBurst(rounds);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double flop = 16.0 * kAcc * kInner * rounds;
    if (flop / s / 1e9 > best) best = flop / s / 1e9;  // the best burst: least disturbed by other load
  }
  return best;
}

}  // namespace fusion::peers
