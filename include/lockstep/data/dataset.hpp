// In-memory data set: a (samples, features) float matrix and one label per
// sample. Labels are class indices (int32) for classification, or rows of
// floats for regression targets.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "lockstep/core/error.hpp"

namespace lockstep {

namespace detail {
// "nan", "inf" or "-inf" for a value that is not finite (glibc would print
// a NaN with its sign bit set as "-nan").
inline const char* non_finite_text(double v) { return std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf"; }

// The index of the first NaN or infinity in v[0, n), or n. The scan of all
// values is a branch-free reduction, cheap next to reading the data set.
template <class T>
std::size_t first_non_finite(const T* v, std::size_t n) {
  constexpr std::size_t kBlock = 4096;
  for (std::size_t at = 0; at < n; at += kBlock) {
    const std::size_t end = n - at < kBlock ? n : at + kBlock;
    bool bad = false;
    for (std::size_t i = at; i < end; ++i) bad |= !(std::fabs(v[i]) <= std::numeric_limits<T>::max());
    if (!bad) continue;
    for (std::size_t i = at; i < end; ++i)
      if (!std::isfinite(v[i])) return i;
  }
  return n;
}
}  // namespace detail

template <class Label = std::int32_t>
class BasicDataset {
 public:
  using label_type = Label;

  BasicDataset() = default;

  // features: samples * feature_count values, row-major.
  // labels: samples * label_width values.
  BasicDataset(std::vector<float> features, std::size_t feature_count, std::vector<Label> labels,
               std::size_t label_width = 1)
      : features_(std::move(features)),
        labels_(std::move(labels)),
        feature_count_(feature_count),
        label_width_(label_width) {
    require(feature_count_ > 0, "Dataset: feature count is 0, expected at least 1");
    require(label_width_ > 0, "Dataset: label width is 0, expected at least 1");
    require(features_.size() % feature_count_ == 0, "Dataset: ", features_.size(),
            " feature values are not a whole number of rows of ", feature_count_);
    const std::size_t samples = features_.size() / feature_count_;
    require(labels_.size() == samples * label_width_, "Dataset: ", samples, " samples but ",
            labels_.size() / label_width_, " labels; expected one label per sample");
    // A NaN or infinite input makes every loss it touches NaN, many steps
    // later and far from its cause; here the sample and the feature are known.
    const std::size_t bad = detail::first_non_finite(features_.data(), features_.size());
    require(bad == features_.size(), "Dataset: feature ", bad % feature_count_, " of sample ",
            bad / feature_count_, " is ", bad < features_.size() ? detail::non_finite_text(features_[bad]) : "",
            ", expected a finite number");
    if constexpr (std::is_floating_point_v<Label>) {
      const std::size_t bad_label = detail::first_non_finite(labels_.data(), labels_.size());
      require(bad_label == labels_.size(), "Dataset: target ", bad_label % label_width_, " of sample ",
              bad_label / label_width_, " is ",
              bad_label < labels_.size() ? detail::non_finite_text(static_cast<double>(labels_[bad_label])) : "",
              ", expected a finite number");
    }
  }

  std::size_t size() const { return label_width_ ? labels_.size() / label_width_ : 0; }
  bool empty() const { return size() == 0; }
  std::size_t feature_count() const { return feature_count_; }
  std::size_t label_width() const { return label_width_; }

  const float* features(std::size_t sample) const { return features_.data() + sample * feature_count_; }
  const Label* labels(std::size_t sample) const { return labels_.data() + sample * label_width_; }
  Label label(std::size_t sample) const { return labels_[sample * label_width_]; }

  const std::vector<float>& feature_data() const { return features_; }
  const std::vector<Label>& label_data() const { return labels_; }

  // The samples [first, first + count) as a new data set (a validation split).
  BasicDataset slice(std::size_t first, std::size_t count) const {
    require(first + count <= size(), "Dataset::slice: samples [", first, ", ", first + count,
            ") are outside a data set of ", size());
    std::vector<float> f(features_.begin() + static_cast<std::ptrdiff_t>(first * feature_count_),
                         features_.begin() + static_cast<std::ptrdiff_t>((first + count) * feature_count_));
    std::vector<Label> l(labels_.begin() + static_cast<std::ptrdiff_t>(first * label_width_),
                         labels_.begin() + static_cast<std::ptrdiff_t>((first + count) * label_width_));
    return BasicDataset(std::move(f), feature_count_, std::move(l), label_width_);
  }

 private:
  std::vector<float> features_;
  std::vector<Label> labels_;
  std::size_t feature_count_ = 0;
  std::size_t label_width_ = 0;
};

using Dataset = BasicDataset<std::int32_t>;
using RegressionDataset = BasicDataset<float>;

}  // namespace lockstep
