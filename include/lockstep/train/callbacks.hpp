// Callbacks are a variadic pack of plain objects (ensmallen's shape). Each may
// define any of these hooks; a hook it does not define compiles to nothing:
//   on_train_begin(const TrainInfo&)          on_train_end(const Logs&)
//   on_epoch_begin(int epoch, const TrainInfo&)
//   on_batch_end(std::size_t step, const Logs&)
//   on_epoch_end(int epoch, const Logs&)      returning true stops training
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>

#include "lockstep/core/traits.hpp"
#include "lockstep/train/logs.hpp"

namespace lockstep::detail {

template <class C>
using has_train_begin = decltype(std::declval<C&>().on_train_begin(std::declval<const TrainInfo&>()));
template <class C>
using has_train_end = decltype(std::declval<C&>().on_train_end(std::declval<const Logs&>()));
template <class C>
using has_epoch_begin = decltype(std::declval<C&>().on_epoch_begin(0, std::declval<const TrainInfo&>()));
template <class C>
using has_batch_end = decltype(std::declval<C&>().on_batch_end(std::size_t{}, std::declval<const Logs&>()));
template <class C>
using has_epoch_end = decltype(std::declval<C&>().on_epoch_end(0, std::declval<const Logs&>()));

template <class... C>
void train_begin([[maybe_unused]] const TrainInfo& info, C&... cb) {
  (
      [&] {
        if constexpr (is_detected<has_train_begin, C>) cb.on_train_begin(info);
      }(),
      ...);
}
template <class... C>
void train_end([[maybe_unused]] const Logs& logs, C&... cb) {
  (
      [&] {
        if constexpr (is_detected<has_train_end, C>) cb.on_train_end(logs);
      }(),
      ...);
}
template <class... C>
void epoch_begin([[maybe_unused]] int epoch, [[maybe_unused]] const TrainInfo& info, C&... cb) {
  (
      [&] {
        if constexpr (is_detected<has_epoch_begin, C>) cb.on_epoch_begin(epoch, info);
      }(),
      ...);
}
template <class... C>
void batch_end([[maybe_unused]] std::size_t step, [[maybe_unused]] const Logs& logs, C&... cb) {
  (
      [&] {
        if constexpr (is_detected<has_batch_end, C>) cb.on_batch_end(step, logs);
      }(),
      ...);
}
// True when any callback asks to stop.
template <class... C>
bool epoch_end([[maybe_unused]] int epoch, [[maybe_unused]] const Logs& logs, C&... cb) {
  bool stop = false;
  (
      [&] {
        if constexpr (is_detected<has_epoch_end, C>) {
          if constexpr (std::is_same_v<has_epoch_end<C>, bool>)
            stop = cb.on_epoch_end(epoch, logs) || stop;
          else
            cb.on_epoch_end(epoch, logs);
        }
      }(),
      ...);
  return stop;
}

}  // namespace lockstep::detail
