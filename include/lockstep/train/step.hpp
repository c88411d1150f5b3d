// The step skeleton, written once for every backend and strategy: one
// replica's part of a synchronous training step, and the loss and metric sums
// that evaluation shares with it. An executor supplies the replica's view of
// the step (its context, pass, memory, the collective's group and queue) and
// runs this on each replica; what differs between strategies is the
// StepRule's two calls (strategy/step_rule.hpp).
#pragma once

#include <cstddef>
#include <type_traits>

#include "lockstep/layers/pass.hpp"
#include "lockstep/metrics/accuracy.hpp"
#include "lockstep/observe/tracer.hpp"
#include "lockstep/strategy/all_reduce_update.hpp"
#include "lockstep/strategy/sharded_update.hpp"

namespace lockstep::detail {

// The part of an executor's ReplicaStep view that is the same on every
// backend: one replica's buffers, by the member names both executors'
// replicas use (grads, state, x, labels, row_stats, ws).
template <class Model, class Replica, std::size_t Stats>
class ReplicaBuffers {
 public:
  explicit ReplicaBuffers(Replica& rep) : rep_(rep) {}
  float* grads() { return rep_.grads.data(); }                     // the gradients, then the step's statistics
  std::size_t count() const { return Model::kParams + Stats; }
  std::size_t params_count() const { return Model::kParams; }
  float* state() { return rep_.state.data(); }
  const float* x() const { return rep_.x.data(); }
  const auto* labels() const { return rep_.labels.data(); }
  float* row_stats() { return rep_.row_stats.data(); }
  auto& workspace() { return rep_.ws; }

 protected:
  Replica& rep_;
};

// How a rule combines, for the profiler's collective spans.
template <class Rule>
constexpr const char* rule_name() {
  if constexpr (std::is_base_of_v<ShardedUpdate, Rule>)
    return "reduce-scatter, sharded update";
  else if constexpr (std::is_base_of_v<AllReduceUpdate, Rule>)
    return "all-reduce";
  else
    return "reduce to replica 0";
}

template <class Loss, class MetricList>
struct StepSkeleton;

template <class Loss, class... Metric>
struct StepSkeleton<Loss, Metrics<Metric...>> {
  // The loss sum, then each metric's sum: the step's statistics.
  static constexpr std::size_t kStats = 1 + sizeof...(Metric);

  // Per-row loss and metric values of `rows` rows into row_stats (kStats
  // columns of `capacity`), their sums into stats[0..kStats), and the output
  // gradient of sum(loss) * scale into grad when it is not null. The sums
  // are the pass's (`sums`: OwnRows, or the row-order scheme's over the
  // global batch).
  template <int Outputs, class Ctx, class T, class Label, class Rows = OwnRows>
  static void loss_and_metrics(Ctx& ctx, const T* out, const Label* labels, int rows, T scale, T* row_stats,
                               std::size_t capacity, T* grad, T* stats, const Rows& sums = {}) {
    [[maybe_unused]] const std::size_t n = static_cast<std::size_t>(rows);
    Loss::template forward_backward<Outputs>(ctx, out, labels, rows, scale, row_stats, grad);
    [[maybe_unused]] std::size_t m = 1;
    (ctx.for_each_row(n, Metric::template row<Outputs>(out, labels, row_stats + m++ * capacity)), ...);
    sums.sums(ctx, static_cast<const T*>(row_stats), capacity, rows, kStats, stats);
  }

  // Forward, loss and metrics, backward, then the strategy's combine and
  // update, for `rows` rows of a global batch of `count` samples. Weighting
  // the loss by the global count makes the summed gradients the mean over
  // the real samples of the batch, whatever the slices' sizes.
  template <class Model, class Rule, class Step>
  static void train(Step& step, int rows, std::size_t count) {
    auto& ctx = step.context();
    auto& ws = step.workspace();
    const auto& pass = step.pass();
    float* const grads = step.grads();
    const float* out = Model::forward(ctx, pass, step.variables(), step.state(), step.x(), rows, ws);
    {
      const auto span = observe::scope(pass, observe::Phase::kLoss, "loss and metrics");
      loss_and_metrics<Model::kOutputs>(ctx, out, step.labels(), rows, 1.0f / static_cast<float>(count),
                                        step.row_stats(), static_cast<std::size_t>(ws.capacity()), ws.output_grad(),
                                        grads + Model::kParams, pass.rows);
    }
    Model::backward(ctx, pass, step.variables(), step.state(), step.x(), rows, ws, grads,
                    [&](std::size_t offset, std::size_t size) { Rule::on_gradient_ready(step, offset, size); });
    // The combine, with the update inside it (the sharded rule updates
    // between its two barriers); the update is its own span.
    const auto span = observe::scope(pass, observe::Phase::kCollective, Step::kCollectiveName,
                                     step.count() * sizeof(float), rule_name<Rule>());
    Rule::combine_and_update(step);
  }
};

}  // namespace lockstep::detail
