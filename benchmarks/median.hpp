// The median the benchmarks report over their interleaved rounds (the upper
// middle value of an even count).
#pragma once

#include <algorithm>
#include <vector>

namespace lockstep::bench {
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
}  // namespace lockstep::bench
