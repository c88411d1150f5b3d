// Learning-rate schedules, Keras' formulas and arguments, and Scheduled<Opt,
// Schedule>: any optimizer with a learning_rate whose rate follows a schedule
// of the step count. The rate of update t is schedule(t - 1) (Keras evaluates
// the schedule at optimizer.iterations before the update), computed on the
// host in the State's prepare() and written with the step's other scalars,
// so a step replayed from a CUDA graph uses the current value too.
//   Trainer<MirroredPolicy<HostAllReduce>, Scheduled<Adam, CosineDecay>> t{
//       strategy, Scheduled<Adam, CosineDecay>{Adam{}, CosineDecay{1e-3, 10000}}};
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "lockstep/core/error.hpp"

namespace lockstep {

// initial * decay_rate ^ (step / decay_steps), the exponent floored when staircase.
struct ExponentialDecay {
  double initial_learning_rate, decay_steps, decay_rate;
  bool staircase = false;
  ExponentialDecay(double initial, double steps, double rate, bool stairs = false)
      : initial_learning_rate(initial), decay_steps(steps), decay_rate(rate), staircase(stairs) {
    require(initial > 0 && steps > 0 && rate > 0 && std::isfinite(initial + steps + rate),
            "ExponentialDecay: initial_learning_rate ", initial,
            ", decay_steps ", steps, ", decay_rate ", rate, ", expected all finite and > 0");
  }
  double operator()(std::int64_t step) const {
    double p = static_cast<double>(step) / decay_steps;
    if (staircase) p = std::floor(p);
    return initial_learning_rate * std::pow(decay_rate, p);
  }
};

// values[0] up to and including boundaries[0], values[1] up to boundaries[1], ..., values.back() after.
struct PiecewiseConstantDecay {
  std::vector<std::int64_t> boundaries;
  std::vector<double> values;
  PiecewiseConstantDecay(std::vector<std::int64_t> b, std::vector<double> v) : boundaries(std::move(b)), values(std::move(v)) {
    require(values.size() == boundaries.size() + 1, "PiecewiseConstantDecay: ", boundaries.size(), " boundaries and ",
            values.size(), " values, expected one value more than boundaries");
    require(std::is_sorted(boundaries.begin(), boundaries.end()), "PiecewiseConstantDecay: boundaries must increase");
    for (double x : values)
      require(x > 0 && std::isfinite(x), "PiecewiseConstantDecay: value ", x, ", expected a finite number > 0");
  }
  double operator()(std::int64_t step) const {
    std::size_t i = 0;
    while (i < boundaries.size() && step > boundaries[i]) ++i;
    return values[i];
  }
};

// A linear warmup from initial_learning_rate to warmup_target over
// warmup_steps (where warmup_target is given), then a cosine decay over
// decay_steps to alpha times the peak (Keras' CosineDecay).
struct CosineDecay {
  double initial_learning_rate, decay_steps, alpha = 0.0;
  double warmup_target = 0.0;  // 0: no warmup
  double warmup_steps = 0.0;
  CosineDecay(double initial, double steps, double a = 0.0, double target = 0.0, double warmup = 0.0)
      : initial_learning_rate(initial), decay_steps(steps), alpha(a), warmup_target(target), warmup_steps(warmup) {
    require(initial >= 0 && steps > 0 && a >= 0 && a <= 1 && warmup >= 0 && target >= 0 &&
                std::isfinite(initial + steps + warmup + target),
            "CosineDecay: initial_learning_rate ", initial, ", decay_steps ", steps, ", alpha ", a,
            ", warmup_target ", target, ", warmup_steps ", warmup,
            ": expected decay_steps > 0, alpha in [0, 1] and the others >= 0, all finite");
  }
  double operator()(std::int64_t step) const {
    const double s = static_cast<double>(step);
    const bool warms = warmup_target > 0 && warmup_steps > 0;
    if (warms && s < warmup_steps)
      return initial_learning_rate + (warmup_target - initial_learning_rate) * (s / warmup_steps);
    const double peak = warms ? warmup_target : initial_learning_rate;
    const double t = std::min(s - (warms ? warmup_steps : 0.0), decay_steps);
    const double cosine = 0.5 * (1.0 + std::cos(3.14159265358979323846 * t / decay_steps));
    return peak * ((1.0 - alpha) * cosine + alpha);
  }
};

// (initial - end) * (1 - step / decay_steps) ^ power + end, the step held at
// decay_steps, or, with cycle, decay_steps stretched to the next multiple.
struct PolynomialDecay {
  double initial_learning_rate, decay_steps, end_learning_rate = 1e-4, power = 1.0;
  bool cycle = false;
  PolynomialDecay(double initial, double steps, double end = 1e-4, double pw = 1.0, bool cyc = false)
      : initial_learning_rate(initial), decay_steps(steps), end_learning_rate(end), power(pw), cycle(cyc) {
    require(initial > 0 && steps > 0 && end >= 0 && pw > 0 && std::isfinite(initial + steps + end + pw),
            "PolynomialDecay: initial_learning_rate ", initial,
            ", decay_steps ", steps, ", end_learning_rate ", end, ", power ", pw,
            ": expected initial, decay_steps and power > 0, end >= 0, all finite");
  }
  double operator()(std::int64_t step) const {
    double s = static_cast<double>(step), steps = decay_steps;
    if (cycle)
      steps = decay_steps * std::max(1.0, std::ceil(s / decay_steps));
    else
      s = std::min(s, decay_steps);
    return (initial_learning_rate - end_learning_rate) * std::pow(1.0 - s / steps, power) + end_learning_rate;
  }
};

// Opt with its learning rate taken from `schedule` at every step.
template <class Opt, class Schedule>
struct Scheduled : Opt {
  Schedule schedule;
  Scheduled(Opt opt, Schedule s) : Opt(std::move(opt)), schedule(std::move(s)) {}

  template <class Ctx>
  class State : public Opt::template State<Ctx> {
    using Base = typename Opt::template State<Ctx>;

   public:
    State(const Scheduled& opt, std::size_t params) : Base(opt, params) {}
    void prepare(const Scheduled& opt) {
      Opt now = opt;
      const double rate = opt.schedule(this->iterations());
      now.learning_rate = static_cast<float>(rate);
      // A schedule that grows (a decay_rate above 1) or a user's own may leave
      // the range; the step would then write inf or NaN into every weight.
      require(rate >= 0 && std::isfinite(now.learning_rate), "Scheduled: the schedule gave learning rate ", rate,
              " for update ", this->iterations() + 1, ", expected a finite number >= 0");
      Base::prepare(now);
    }
  };
};

namespace detail {
// Whether Opt is a Scheduled or derives from one (ClipNorm<Scheduled<...>>).
template <class Opt, class Schedule>
std::true_type scheduled_base(const Scheduled<Opt, Schedule>*);
std::false_type scheduled_base(const void*);
template <class Opt>
using is_scheduled = decltype(scheduled_base(static_cast<const Opt*>(nullptr)));

// The learning rate that a callback (LearningRateScheduler, ReduceLROnPlateau)
// sets. A Scheduled optimizer would overwrite it from its schedule at the next
// step, so the callback would do nothing, silently: as in Keras, whose
// optimizer refuses to have a schedule's rate set, that is an error.
template <class Opt>
float& settable_learning_rate(Opt& optimizer) {
  static_assert(!is_scheduled<Opt>::value,
                "This callback sets the optimizer's learning rate, but a Scheduled<Opt, Schedule> optimizer takes it "
                "from its schedule at every step, which would undo the callback's change: use the plain optimizer "
                "(Adam, Sgd) with LearningRateScheduler or ReduceLROnPlateau, or the schedule without them.");
  return optimizer.learning_rate;
}
}  // namespace detail

}  // namespace lockstep
