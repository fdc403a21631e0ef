// Measured fp32 peak of one core: a loop of independent 256-bit fused multiply-adds (AVX2+FMA,
// 16 FLOP each, 12 accumulators to cover the FMA latency), timed for `seconds` on the calling
// thread. The GFLOP/s figures of the peer benchmark are read against it.
// Returns 0 when the CPU lacks AVX2 or FMA.
#pragma once

namespace fusion::peers {

double MeasureFmaPeakGflops(double seconds = 0.5);

}  // namespace fusion::peers
