// lockstep::Error is a std::runtime_error whose message is built from parts.
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>

#include "lockstep/core/error.hpp"

TEST_CASE("require throws lockstep::Error with the streamed message") {
  CHECK_NOTHROW(lockstep::require(true, "never"));
  try {
    lockstep::require(false, "batch size ", 0, ", expected at least ", 1);
    FAIL("require did not throw");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()) == "lockstep: batch size 0, expected at least 1");
    CHECK(dynamic_cast<const lockstep::Error*>(&e) != nullptr);
  }
}
