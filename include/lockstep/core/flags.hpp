// Numbers from the command line, checked: parse_integer and parse_number read
// a flag's whole value and return it only inside [min, max], so that
// "--replicas 4294967298" is an Error stating the range instead of becoming 2
// through a narrowing cast, and "--batch-size 99999999999999999999" cannot
// overflow. The example and the benchmarks parse their flags with these, and
// so may any program that builds a FitOptions from its command line.
#pragma once

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "lockstep/core/error.hpp"

namespace lockstep {

namespace detail {
// v < 0, without the "always false" warning an unsigned T would bring.
template <class T>
constexpr bool below_zero(T v) {
  if constexpr (std::is_signed_v<T>)
    return v < 0;
  else
    return static_cast<void>(v), false;
}
}  // namespace detail

// The integer `text` given to `flag`, which must lie in [min, max]: decimal
// digits with an optional sign, nothing else (no spaces, no "1e3", no "0x10").
template <class T>
T parse_integer(const std::string& flag, const std::string& text, T min, T max) {
  static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool>, "parse_integer reads an integer type");
  const char* p = text.c_str();
  const bool negative = *p == '-';
  if (*p == '-' || *p == '+') ++p;
  bool digits = *p != '\0';
  bool too_big = false;  // beyond unsigned long long: out of every range
  unsigned long long magnitude = 0;
  for (; digits && *p != '\0'; ++p) {
    if (*p < '0' || *p > '9') {
      digits = false;
      break;
    }
    const unsigned long long d = static_cast<unsigned long long>(*p - '0');
    if (magnitude > (ULLONG_MAX - d) / 10)
      too_big = true;
    else
      magnitude = magnitude * 10 + d;
  }
  require(digits, flag, ": '", text, "' is not an integer; expected an integer from ", +min, " to ", +max);
  // Compared as magnitudes, so that no value is converted before it is known to fit.
  bool in_range = !too_big;
  if (negative && magnitude != 0) {
    if constexpr (std::is_signed_v<T>) {
      const unsigned long long lowest =
          detail::below_zero(min) ? static_cast<unsigned long long>(-(min + 1)) + 1 : 0;
      in_range = in_range && magnitude <= lowest;
    } else {
      in_range = false;
    }
  } else {
    in_range = in_range && !detail::below_zero(max) && magnitude <= static_cast<unsigned long long>(max) &&
               (detail::below_zero(min) || magnitude >= static_cast<unsigned long long>(min));
  }
  require(in_range, flag, ": ", text, " is out of range; expected an integer from ", +min, " to ", +max);
  if (negative && magnitude != 0) return static_cast<T>(-static_cast<long long>(magnitude - 1) - 1);
  return static_cast<T>(magnitude);
}

// The finite number `text` given to `flag` (strtod's syntax: "300", "2.5",
// "1e3"), which must lie in (min, max] where min_exclusive, else [min, max].
inline double parse_number(const std::string& flag, const std::string& text, double min, double max,
                           bool min_exclusive = false) {
  const char* range_open = min_exclusive ? "greater than " : "from ";
  const char* range_close = min_exclusive ? " and at most " : " to ";
  char* end = nullptr;
  errno = 0;
  const double value = text.empty() || text[0] == ' ' || text[0] == '\t' ? 0.0 : std::strtod(text.c_str(), &end);
  require(end != nullptr && end != text.c_str() && *end == '\0', flag, ": '", text, "' is not a number; expected ",
          range_open, min, range_close, max);
  const bool in_range =
      errno != ERANGE && std::isfinite(value) && (min_exclusive ? value > min : value >= min) && value <= max;
  require(in_range, flag, ": ", text, " is out of range; expected a finite number ", range_open, min, range_close,
          max);
  return value;
}

}  // namespace lockstep
