// Input<N>: the first element of a Sequential model, giving the feature count
// from which every later layer infers its shape at compile time.
#pragma once

namespace lockstep {

template <int N>
struct Input {
  static_assert(N > 0, "Input<N> needs N > 0: N is the number of features of one sample.");
  static constexpr int kUnits = N;
};

}  // namespace lockstep
