// Detection idiom used to check policies and find optional hooks at compile time.
#pragma once

#include <type_traits>

namespace lockstep::detail {

template <class, template <class...> class Op, class... Args>
struct detector : std::false_type {};
template <template <class...> class Op, class... Args>
struct detector<std::void_t<Op<Args...>>, Op, Args...> : std::true_type {};

// is_detected<Op, Args...> is true when Op<Args...> is a valid type.
template <template <class...> class Op, class... Args>
inline constexpr bool is_detected = detector<void, Op, Args...>::value;

}  // namespace lockstep::detail
