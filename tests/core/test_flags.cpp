// parse_integer and parse_number (core/flags.hpp): a flag's value is read
// whole and returned only inside its range; anything else is an Error that
// states the range, never a value narrowed or wrapped into it.
#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "lockstep/core/flags.hpp"

using lockstep::Error;
using lockstep::parse_integer;
using lockstep::parse_number;

TEST_CASE("parse_integer returns values inside the range") {
  CHECK(parse_integer<int>("--replicas", "1", 1, 1024) == 1);
  CHECK(parse_integer<int>("--replicas", "1024", 1, 1024) == 1024);
  CHECK(parse_integer<int>("--replicas", "+7", 1, 1024) == 7);
  CHECK(parse_integer<int>("--x", "-5", -10, 10) == -5);
  CHECK(parse_integer<long long>("--x", "-9223372036854775808", std::numeric_limits<long long>::min(), 0) ==
        std::numeric_limits<long long>::min());
  CHECK(parse_integer<std::uint64_t>("--seed", "18446744073709551615", 0, UINT64_MAX) == UINT64_MAX);
  CHECK(parse_integer<std::size_t>("--batch-size", "2147483647", 1, 2147483647) == 2147483647u);
}

TEST_CASE("parse_integer rejects values that a cast would have narrowed, with the range in the message") {
  // 4294967298 is 2^32 + 2: static_cast<int> made it 2.
  CHECK_THROWS_WITH_AS(parse_integer<int>("--replicas", "4294967298", 1, 1024),
                       "lockstep: --replicas: 4294967298 is out of range; expected an integer from 1 to 1024", Error);
  CHECK_THROWS_WITH_AS(parse_integer<std::size_t>("--batch-size", "99999999999999999999", 1, 2147483647),
                       doctest::Contains("99999999999999999999 is out of range; expected an integer from 1 to "
                                         "2147483647"),
                       Error);
  CHECK_THROWS_WITH_AS(parse_integer<int>("--epochs", "1000001", 0, 1000000), doctest::Contains("from 0 to 1000000"),
                       Error);
  CHECK_THROWS_WITH_AS(parse_integer<int>("--replicas", "0", 1, 1024), doctest::Contains("out of range"), Error);
  CHECK_THROWS_WITH_AS(parse_integer<std::uint64_t>("--seed", "-1", 0, UINT64_MAX),
                       doctest::Contains("--seed: -1 is out of range; expected an integer from 0 to "
                                         "18446744073709551615"),
                       Error);
  CHECK_THROWS_WITH_AS(parse_integer<std::uint64_t>("--seed", "18446744073709551616", 0, UINT64_MAX),
                       doctest::Contains("out of range"), Error);
  CHECK_THROWS_WITH_AS(parse_integer<long long>("--x", "-9223372036854775809", std::numeric_limits<long long>::min(), 0),
                       doctest::Contains("out of range"), Error);
}

TEST_CASE("parse_integer rejects what is not a whole decimal integer") {
  for (const char* text : {"", "abc", "12abc", " 5", "5 ", "1e3", "0x10", "2.5", "-", "+"}) {
    CAPTURE(text);
    CHECK_THROWS_WITH_AS(parse_integer<int>("--epochs", text, 0, 1000000),
                         doctest::Contains("is not an integer; expected an integer from 0 to 1000000"), Error);
  }
}

TEST_CASE("parse_number takes finite numbers in range, and states the range otherwise") {
  CHECK(parse_number("--timeout", "300", 0.0, 604800.0, true) == 300.0);
  CHECK(parse_number("--timeout", "2.5", 0.0, 604800.0, true) == 2.5);
  CHECK(parse_number("--timeout", "1e3", 0.0, 604800.0, true) == 1000.0);
  for (const char* text : {"0", "-1", "nan", "inf", "-inf", "1e400", "604801"}) {
    CAPTURE(text);
    CHECK_THROWS_WITH_AS(parse_number("--timeout", text, 0.0, 604800.0, true),
                         doctest::Contains("is out of range; expected a finite number greater than 0 and at most 604800"), Error);
  }
  for (const char* text : {"", "abc", "5s", " 5"}) {
    CAPTURE(text);
    CHECK_THROWS_WITH_AS(parse_number("--timeout", text, 0.0, 604800.0, true), doctest::Contains("is not a number"),
                         Error);
  }
}
