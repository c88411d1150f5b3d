// Dropout<Numerator, Denominator = 100>: Keras' Dropout(rate) with rate =
// Numerator / Denominator (Dropout<20> is Dropout(0.2); C++17 has no float
// template arguments). While training, each value is kept with probability
// 1 - rate and scaled by 1 / (1 - rate) (inverted dropout); at inference the
// layer is the identity. Whether value j of a sample is kept depends only on
// (seed, epoch, step, the sample's global row in the batch, j, layer): never
// on the replica count or on which replica computes the row, so N replicas
// train exactly as one does. Backward recomputes the mask: no scratch.
#pragma once

#include <cstddef>
#include <cstdint>

#include "lockstep/core/bits.hpp"
#include "lockstep/core/config.hpp"
#include "lockstep/core/rng.hpp"
#include "lockstep/layers/layer.hpp"

namespace lockstep {

namespace kernels {
// dst = src * mask * scale for the n values that start at global value index
// `base` (the pass's first row times the width). One Philox call gives four
// words, so call k handles the global indices [4 (base / 4 + k), +4) that
// fall inside [base, base + n): threads write disjoint values.
template <class T = float>
struct DropoutMask {
  const T* src;
  T* dst;
  std::uint64_t stream, base;
  std::uint64_t s;  // the step's key, set from the pass's key source when the work runs
  std::size_t n;
  std::uint32_t threshold;  // a value is dropped when its 32-bit word is below rate * 2^32
  T scale;
  LOCKSTEP_HOST_DEVICE void operator()(std::size_t k) const {
    const std::uint64_t quad = base / 4 + k;
    std::uint32_t words[4];
    Philox4x32::generate(s, stream, quad, words);
    for (std::uint64_t w = 0; w < 4; ++w) {
      const std::uint64_t g = quad * 4 + w;
      if (g < base || g >= base + n) continue;
      const std::size_t i = static_cast<std::size_t>(g - base);
      dst[i] = words[w] >= threshold ? src[i] * scale : T(0);
    }
  }
  // The effect of calls [0, calls): the quads that lie wholly inside [base, base
  // + n) four at a time through Philox4x32::generate4, the same words, and a
  // select loop over them that the compiler vectorises; the partial quads at
  // the ends through operator().
  void host_loop(std::size_t calls) const {
    if (calls == 0) return;
    const std::uint64_t first_quad = base / 4;
    std::size_t k = 0;
    if (base % 4 != 0) (*this)(k++);  // a quad that starts before base
    const std::size_t whole = static_cast<std::size_t>((base + n) / 4 - first_quad);  // quads ending by base + n
    for (; k + 4 <= whole; k += 4) {
      std::uint32_t words[16];
      Philox4x32::generate4(s, stream, first_quad + k, words);
      const std::size_t at = static_cast<std::size_t>((first_quad + k) * 4 - base);
      const T* in = src + at;
      T* out = dst + at;
      // Every product is computed and the dropped ones masked to +0: a
      // multiply under a condition is not vectorised (it might trap).
      LOCKSTEP_INDEPENDENT_ITERATIONS
      for (std::size_t i = 0; i < 16; ++i) {
        const BitsOf<T> keep = words[i] >= threshold ? ~BitsOf<T>(0) : BitsOf<T>(0);
        out[i] = from_bits<T>(bits_of(in[i] * scale) & keep);
      }
    }
    for (; k < calls; ++k) (*this)(k);
  }
  // How many calls cover n values from `base`.
  LOCKSTEP_HOST_DEVICE static std::size_t calls(std::uint64_t base, std::size_t n) {
    return n == 0 ? 0 : static_cast<std::size_t>((base + n - 1) / 4 - base / 4 + 1);
  }
};
}  // namespace kernels

template <int Numerator, int Denominator = 100>
struct Dropout {
  static_assert(Denominator > 0 && Numerator >= 0 && Numerator < Denominator,
                "Dropout<Numerator, Denominator>: the rate Numerator / Denominator must be in [0, 1): "
                "Dropout<20> drops 20% of the values, as Keras' Dropout(0.2).");
  static constexpr double kRate = static_cast<double>(Numerator) / Denominator;

  template <class In>
  struct Bind : detail::ShapePreserving<In> {
    static constexpr const char* kName = "dropout";
    using detail::ShapePreserving<In>::kIn;
    template <class Ctx, class P, class T>
    static void forward(Ctx& ctx, const P& pass, Slots<T>, const T* x, T* y, int rows) {
      apply(ctx, pass, x, y, rows);
    }
    template <class Ctx, class P, class T>
    static void backward(Ctx& ctx, const P& pass, Slots<T>, const T*, const T*, T* dy, T* dx, T*, int rows) {
      if (dx) apply(ctx, pass, dy, dx, rows);
    }

   private:
    template <class Ctx, class P, class T>
    static void apply(Ctx& ctx, const P& pass, const T* src, T* dst, int rows) {
      const std::size_t n = static_cast<std::size_t>(rows) * kIn;
      if (!pass.training() || Numerator == 0) {
        ctx.copy(dst, src, n);
        return;
      }
      const std::uint64_t base = pass.first_row * static_cast<std::uint64_t>(kIn);
      kernels::DropoutMask<T> mask{};
      mask.src = src;
      mask.dst = dst;
      mask.stream = rng_stream::kDropout + pass.layer;
      mask.base = base;
      mask.n = n;
      mask.threshold = static_cast<std::uint32_t>(kRate * 4294967296.0);
      mask.scale = static_cast<T>(1.0 / (1.0 - kRate));
      ctx.for_each_index_reading(kernels::DropoutMask<T>::calls(base, n), mask, pass.key_source());
    }
  };
};

}  // namespace lockstep
