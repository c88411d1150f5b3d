// Philox4x32-10 against the Random123 known-answer vectors, and the properties
// that initialisation and shuffling rely on.
#include <doctest/doctest.h>

#include <cstdint>
#include <set>

#include "lockstep/core/rng.hpp"

using lockstep::Philox4x32;

TEST_CASE("Philox4x32-10 matches the Random123 known answers") {
  std::uint32_t out[4];
  Philox4x32::generate(0, 0, 0, out);  // counter 0, key 0
  CHECK(out[0] == 0x6627e8d5u);
  CHECK(out[1] == 0xe169c58du);
  CHECK(out[2] == 0xbc57ac4cu);
  CHECK(out[3] == 0x9b00dbd8u);
  // counter {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, key {0xa4093822, 0x299f31d0}
  Philox4x32::generate(0x299f31d0a4093822ull, 0x0370734413198a2eull, 0x85a308d3243f6a88ull, out);
  CHECK(out[0] == 0xd16cfe09u);
  CHECK(out[1] == 0x94fdccebu);
  CHECK(out[2] == 0x5001e420u);
  CHECK(out[3] == 0x24126ea1u);
}

TEST_CASE("generate4 gives the words of four generate calls - across a carry into the counter's high word") {
  // The known-answer key and stream; first indices that cross 2^32 and 2^64 between the four lanes.
  const std::uint64_t seed = 0x299f31d0a4093822ull, stream = 0x0370734413198a2eull;
  for (const std::uint64_t first : {std::uint64_t{0}, std::uint64_t{0x85a308d3243f6a88ull}, std::uint64_t{0xFFFFFFFEull},
                                    ~std::uint64_t{1}}) {
    CAPTURE(first);
    std::uint32_t four[16], one[4];
    Philox4x32::generate4(seed, stream, first, four);
    for (std::uint64_t j = 0; j < 4; ++j) {
      Philox4x32::generate(seed, stream, first + j, one);
      for (std::uint64_t w = 0; w < 4; ++w) CHECK(four[4 * j + w] == one[w]);
    }
  }
}

TEST_CASE("uniform values depend on (seed - stream - index) only and lie in 0..1") {
  double sum = 0;
  std::set<float> distinct;
  for (std::uint64_t i = 0; i < 10000; ++i) {
    const float u = Philox4x32::uniform(7, 3, i);
    CHECK(u >= 0.0f);
    CHECK(u < 1.0f);
    CHECK(u == Philox4x32::uniform(7, 3, i));
    sum += u;
    distinct.insert(u);
  }
  CHECK(sum / 10000 == doctest::Approx(0.5).epsilon(0.02));
  CHECK(distinct.size() > 9900);
  CHECK(Philox4x32::uniform(7, 3, 0) != Philox4x32::uniform(8, 3, 0));
  CHECK(Philox4x32::uniform(7, 3, 0) != Philox4x32::uniform(7, 4, 0));
}
