// Callbacks are a variadic pack of plain objects (ensmallen's shape). Each may
// define any of these hooks; a hook it does not define compiles to nothing:
//   on_train_begin(const TrainInfo&)          on_train_end(const Logs&)
//   on_epoch_begin(int epoch, const TrainInfo&)
//   on_batch_begin(std::size_t step)          (Keras' on_train_batch_begin too)
//   on_batch_end(std::size_t step, const Logs&)   (Keras' on_train_batch_end too)
//   on_epoch_end(int epoch, const Logs&)      returning true stops training
// A member that has a hook's name but none of its signatures, or a hook that
// returns anything but void (bool for on_epoch_end), is a compile error that
// shows the signature expected: a typo in a parameter never silently turns
// a hook off. Keras hooks lockstep never calls (on_test_*, on_predict_*)
// are errors too.
// Each hook may also take the fit's view as a last argument (a template
// parameter: `template <class View> void on_epoch_end(int, const Logs&, View&
// view)`), which reaches the live model, the optimizer (whose learning rate
// the next step uses), the run state and snapshots: train/fit_view.hpp.
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>

#include "lockstep/core/traits.hpp"
#include "lockstep/train/logs.hpp"

namespace lockstep::detail {

template <class C, class... A>
using has_train_begin = decltype(std::declval<C&>().on_train_begin(std::declval<A>()...));
template <class C, class... A>
using has_train_end = decltype(std::declval<C&>().on_train_end(std::declval<A>()...));
template <class C, class... A>
using has_epoch_begin = decltype(std::declval<C&>().on_epoch_begin(std::declval<A>()...));
template <class C, class... A>
using has_batch_end = decltype(std::declval<C&>().on_batch_end(std::declval<A>()...));
template <class C, class... A>
using has_epoch_end = decltype(std::declval<C&>().on_epoch_end(std::declval<A>()...));
template <class C, class... A>
using has_batch_begin = decltype(std::declval<C&>().on_batch_begin(std::declval<A>()...));
template <class C, class... A>
using has_train_batch_begin = decltype(std::declval<C&>().on_train_batch_begin(std::declval<A>()...));
template <class C, class... A>
using has_train_batch_end = decltype(std::declval<C&>().on_train_batch_end(std::declval<A>()...));

// Whether class C has any member called `name` (a function, an overload set,
// a template or a data member): a class deriving from C and from one with an
// int `name` makes &Derived::name ambiguous exactly when C has one.
#define LOCKSTEP_MEMBER_NAMED(name)                                                                   \
  struct name##_fallback {                                                                            \
    int name;                                                                                         \
  };                                                                                                  \
  template <class C>                                                                                  \
  struct name##_derived : C, name##_fallback {};                                                      \
  template <class C>                                                                                  \
  using name##_unambiguous = decltype(&name##_derived<C>::name);                                      \
  template <class C, bool = std::is_class_v<C> && !std::is_final_v<C>>                                \
  struct has_member_##name : std::false_type {};                                                      \
  template <class C>                                                                                  \
  struct has_member_##name<C, true> : std::bool_constant<!is_detected<name##_unambiguous, C>> {};
LOCKSTEP_MEMBER_NAMED(on_train_begin)
LOCKSTEP_MEMBER_NAMED(on_train_end)
LOCKSTEP_MEMBER_NAMED(on_epoch_begin)
LOCKSTEP_MEMBER_NAMED(on_epoch_end)
LOCKSTEP_MEMBER_NAMED(on_batch_begin)
LOCKSTEP_MEMBER_NAMED(on_batch_end)
LOCKSTEP_MEMBER_NAMED(on_train_batch_begin)
LOCKSTEP_MEMBER_NAMED(on_train_batch_end)
LOCKSTEP_MEMBER_NAMED(on_test_begin)
LOCKSTEP_MEMBER_NAMED(on_test_end)
LOCKSTEP_MEMBER_NAMED(on_test_batch_begin)
LOCKSTEP_MEMBER_NAMED(on_test_batch_end)
LOCKSTEP_MEMBER_NAMED(on_predict_begin)
LOCKSTEP_MEMBER_NAMED(on_predict_end)
LOCKSTEP_MEMBER_NAMED(on_predict_batch_begin)
LOCKSTEP_MEMBER_NAMED(on_predict_batch_end)
#undef LOCKSTEP_MEMBER_NAMED

// A hook found with the arguments alone or with the view too, and its result.
template <template <class...> class Probe, class C, class View, class... A>
constexpr bool hook_callable() {
  return is_detected<Probe, C, A..., View&> || is_detected<Probe, C, A...>;
}
template <template <class...> class Probe, class C, class View, class... A>
constexpr bool hook_returns_void_or(bool bool_allowed) {
  if constexpr (is_detected<Probe, C, A..., View&>) {
    using R = Probe<C, A..., View&>;
    return std::is_void_v<R> || (bool_allowed && std::is_same_v<R, bool>);
  } else if constexpr (is_detected<Probe, C, A...>) {
    using R = Probe<C, A...>;
    return std::is_void_v<R> || (bool_allowed && std::is_same_v<R, bool>);
  } else {
    return true;
  }
}

// The checks of one callback type C, for a fit whose view is View.
template <class C, class View>
constexpr bool check_callback() {
  using TI = const TrainInfo&;
  using L = const Logs&;
  using S = std::size_t;
  static_assert(!has_member_on_train_begin<C>::value || hook_callable<has_train_begin, C, View, TI>(),
                "A callback's on_train_begin takes (const lockstep::TrainInfo& info) and, optionally, a last "
                "View& view: template <class View> void on_train_begin(const TrainInfo&, View&).");
  static_assert(!has_member_on_train_end<C>::value || hook_callable<has_train_end, C, View, L>(),
                "A callback's on_train_end takes (const lockstep::Logs& logs) and, optionally, a last View& view.");
  static_assert(!has_member_on_epoch_begin<C>::value || hook_callable<has_epoch_begin, C, View, int, TI>(),
                "A callback's on_epoch_begin takes (int epoch, const lockstep::TrainInfo& info) and, optionally, a "
                "last View& view.");
  static_assert(!has_member_on_epoch_end<C>::value || hook_callable<has_epoch_end, C, View, int, L>(),
                "A callback's on_epoch_end takes (int epoch, const lockstep::Logs& logs) and, optionally, a last "
                "View& view; it returns void, or bool where true stops training.");
  static_assert(!has_member_on_batch_begin<C>::value || hook_callable<has_batch_begin, C, View, S>(),
                "A callback's on_batch_begin takes (std::size_t step) and, optionally, a last View& view.");
  static_assert(!has_member_on_batch_end<C>::value || hook_callable<has_batch_end, C, View, S, L>(),
                "A callback's on_batch_end takes (std::size_t step, const lockstep::Logs& logs) and, optionally, "
                "a last View& view.");
  static_assert(!has_member_on_train_batch_begin<C>::value ||
                    hook_callable<has_train_batch_begin, C, View, S>(),
                "A callback's on_train_batch_begin takes (std::size_t step) and, optionally, a last View& view.");
  static_assert(!has_member_on_train_batch_end<C>::value || hook_callable<has_train_batch_end, C, View, S, L>(),
                "A callback's on_train_batch_end takes (std::size_t step, const lockstep::Logs& logs) and, "
                "optionally, a last View& view.");
  static_assert(hook_returns_void_or<has_train_begin, C, View, TI>(false) &&
                    hook_returns_void_or<has_train_end, C, View, L>(false) &&
                    hook_returns_void_or<has_epoch_begin, C, View, int, TI>(false) &&
                    hook_returns_void_or<has_epoch_end, C, View, int, L>(true) &&
                    hook_returns_void_or<has_batch_begin, C, View, S>(false) &&
                    hook_returns_void_or<has_batch_end, C, View, S, L>(false) &&
                    hook_returns_void_or<has_train_batch_begin, C, View, S>(false) &&
                    hook_returns_void_or<has_train_batch_end, C, View, S, L>(false),
                "A callback hook returns void; only on_epoch_end may return bool (true stops training).");
  static_assert(!(has_member_on_test_begin<C>::value || has_member_on_test_end<C>::value ||
                  has_member_on_test_batch_begin<C>::value || has_member_on_test_batch_end<C>::value ||
                  has_member_on_predict_begin<C>::value || has_member_on_predict_end<C>::value ||
                  has_member_on_predict_batch_begin<C>::value || has_member_on_predict_batch_end<C>::value),
                "lockstep calls no on_test_* or on_predict_* hook: evaluate and predict take no callbacks.");
  return true;
}

// Calls hook(cb, args..., view) where the callback takes the view, else
// hook(cb, args...) where it takes the arguments alone; returns whether a
// hook that returns bool asked to stop.
#define LOCKSTEP_CALL_HOOK(probe, name)                                                                  \
  template <class View, class C, class... A>                                                           \
  bool call_##name(View& view, C& cb, A&&... args) {                                                   \
    if constexpr (is_detected<probe, C, A&&..., View&>) {                                              \
      using R = probe<C, A&&..., View&>;                                                               \
      if constexpr (std::is_same_v<R, bool>) return cb.name(std::forward<A>(args)..., view);           \
      cb.name(std::forward<A>(args)..., view);                                                         \
    } else if constexpr (is_detected<probe, C, A&&...>) {                                              \
      using R = probe<C, A&&...>;                                                                      \
      if constexpr (std::is_same_v<R, bool>) return cb.name(std::forward<A>(args)...);                 \
      cb.name(std::forward<A>(args)...);                                                               \
    }                                                                                                  \
    return false;                                                                                      \
  }
LOCKSTEP_CALL_HOOK(has_train_begin, on_train_begin)
LOCKSTEP_CALL_HOOK(has_train_end, on_train_end)
LOCKSTEP_CALL_HOOK(has_epoch_begin, on_epoch_begin)
LOCKSTEP_CALL_HOOK(has_batch_end, on_batch_end)
LOCKSTEP_CALL_HOOK(has_epoch_end, on_epoch_end)
LOCKSTEP_CALL_HOOK(has_batch_begin, on_batch_begin)
LOCKSTEP_CALL_HOOK(has_train_batch_begin, on_train_batch_begin)
LOCKSTEP_CALL_HOOK(has_train_batch_end, on_train_batch_end)
#undef LOCKSTEP_CALL_HOOK

template <class View, class... C>
void train_begin([[maybe_unused]] View& view, [[maybe_unused]] const TrainInfo& info, C&... cb) {
  (call_on_train_begin(view, cb, info), ...);
}
template <class View, class... C>
void train_end([[maybe_unused]] View& view, [[maybe_unused]] const Logs& logs, C&... cb) {
  (call_on_train_end(view, cb, logs), ...);
}
template <class View, class... C>
void epoch_begin([[maybe_unused]] View& view, [[maybe_unused]] int epoch, [[maybe_unused]] const TrainInfo& info, C&... cb) {
  (call_on_epoch_begin(view, cb, epoch, info), ...);
}
template <class View, class... C>
void batch_begin([[maybe_unused]] View& view, [[maybe_unused]] std::size_t step, C&... cb) {
  ((call_on_batch_begin(view, cb, step), call_on_train_batch_begin(view, cb, step)), ...);
}
template <class View, class... C>
void batch_end([[maybe_unused]] View& view, [[maybe_unused]] std::size_t step, [[maybe_unused]] const Logs& logs, C&... cb) {
  ((call_on_batch_end(view, cb, step, logs), call_on_train_batch_end(view, cb, step, logs)), ...);
}
// True when any callback asks to stop.
template <class View, class... C>
bool epoch_end([[maybe_unused]] View& view, [[maybe_unused]] int epoch, [[maybe_unused]] const Logs& logs, C&... cb) {
  bool stop = false;
  ((stop = call_on_epoch_end(view, cb, epoch, logs) || stop), ...);
  return stop;
}

}  // namespace lockstep::detail
