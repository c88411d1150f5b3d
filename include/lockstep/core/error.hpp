// lockstep::Error and the checks that throw it. Every message names the thing,
// the value it had and what was expected, so the user knows what to change.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace lockstep {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error("lockstep: " + what) {}
};

namespace detail {
template <class... Parts>
std::string concat(Parts&&... parts) {
  std::ostringstream out;
  (out << ... << std::forward<Parts>(parts));
  return out.str();
}
}  // namespace detail

// Throws lockstep::Error whose message is the streamed parts.
template <class... Parts>
[[noreturn]] void fail(Parts&&... parts) {
  throw Error(detail::concat(std::forward<Parts>(parts)...));
}

// Throws lockstep::Error with the streamed parts unless `condition` holds.
template <class... Parts>
void require(bool condition, Parts&&... parts) {
  if (!condition) fail(std::forward<Parts>(parts)...);
}

}  // namespace lockstep
