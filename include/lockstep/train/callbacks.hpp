// Callbacks are a variadic pack of plain objects (ensmallen's shape). Each may
// define any of these hooks; a hook it does not define compiles to nothing:
//   on_train_begin(const TrainInfo&)          on_train_end(const Logs&)
//   on_epoch_begin(int epoch, const TrainInfo&)
//   on_batch_end(std::size_t step, const Logs&)
//   on_epoch_end(int epoch, const Logs&)      returning true stops training
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
void batch_end([[maybe_unused]] View& view, [[maybe_unused]] std::size_t step, [[maybe_unused]] const Logs& logs, C&... cb) {
  (call_on_batch_end(view, cb, step, logs), ...);
}
// True when any callback asks to stop.
template <class View, class... C>
bool epoch_end([[maybe_unused]] View& view, [[maybe_unused]] int epoch, [[maybe_unused]] const Logs& logs, C&... cb) {
  bool stop = false;
  ((stop = call_on_epoch_end(view, cb, epoch, logs) || stop), ...);
  return stop;
}

}  // namespace lockstep::detail
