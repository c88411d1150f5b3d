// The device placement log of one fit (lockstep::log_device_placement,
// observe/placement.hpp): Trainer::fit calls log_placement once at its start
// when the switch is on. The words come from where the decisions are made:
// the strategy's name, its step rule (where variables and optimizer state
// live, which collective call combines the gradients), the collective's
// describe() of the buffer, and the executor's placement_records() of its
// replicas. Every process's replica lines are gathered to rank 0 through the
// strategy's group, and rank 0 alone writes the log.
#pragma once

#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "lockstep/collective/collective.hpp"
#include "lockstep/core/backend_tags.hpp"
#include "lockstep/core/error.hpp"
#include "lockstep/core/traits.hpp"
#include "lockstep/observe/placement.hpp"
#include "lockstep/strategy/step_rule.hpp"
#include "lockstep/strategy/strategy.hpp"

namespace lockstep::detail {

// "MirroredPolicy<HostAllReduce>": a strategy's kName, with its collective
// where the strategy is a template over one.
template <class S, class = void>
struct strategy_title {
  static std::string get() { return S::kName; }
};
// Profiled<S> (strategy/profiled.hpp) says so around S's title.
template <class S>
struct strategy_title<S, std::void_t<typename S::profiled_strategy>> {
  static std::string get() { return "Profiled<" + strategy_title<typename S::profiled_strategy>::get() + ">"; }
};
template <template <class> class S, class C>
struct strategy_title<S<C>, std::enable_if_t<is_collective<C> && !is_strategy<C>>> {
  static std::string get() { return concat(S<C>::kName, "<", C::kName, ">"); }
};

// The Group call a rule makes on the gradient buffer, from where it keeps the variables.
template <class Rule>
constexpr CollectiveCall collective_call() {
  if constexpr (Rule::kVariables == Variables::kShared)
    return CollectiveCall::kReduceUpdate;
  else if constexpr (Rule::kVariables == Variables::kCentral)
    return CollectiveCall::kReduceToRoot;
  else
    return CollectiveCall::kAllReduce;
}

template <class C>
using collective_describe = decltype(C::describe(std::size_t{}, 1, 1, CollectiveCall::kAllReduce));
template <class C>
using collective_describe_in_order = decltype(C::describe_in_replica_order(std::size_t{}, 1, 1));
template <class G>
using group_gather = decltype(std::declval<G&>().gather_to_root(std::string()));

// The collective's words, or a note for one without describe().
template <class C>
std::string describe_collective(std::size_t count, int replicas, int processes, CollectiveCall call) {
  if constexpr (is_detected<collective_describe, C>)
    return C::describe(count, replicas, processes, call);
  else
    return concat("(", C::kName, " does not describe its algorithm: it has no static describe(count, replicas, "
                  "processes, call))");
}

// Where the rule keeps the variables and the optimizer state, in the log's words.
template <class Rule, class Backend>
std::pair<std::string, std::string> residence(int total_replicas) {
  if (total_replicas == 1) return {"on the one replica", "with them"};
  if constexpr (Rule::kVariables == Variables::kShared) {
    return {"shared: one copy in host memory that every replica computes with",
            concat("sharded over ", total_replicas, " replicas (each updates its chunk)")};
  } else if constexpr (Rule::kVariables == Variables::kCentral) {
    const char* where = std::is_same_v<Backend, Host>
                            ? "central on replica 0 (task 0), which the other replicas read in shared memory"
                            : "central on replica 0's GPU (task 0), copied to the other replicas after each update";
    return {where, Rule::holds_optimizer_state(1) ? "mirrored on every replica" : "central on replica 0"};
  } else {
    return {"mirrored on every replica",
            Rule::holds_optimizer_state(1) ? "mirrored on every replica" : "central on replica 0"};
  }
}

// Every process's text on rank 0, through the group where it can gather.
template <class Group>
std::vector<std::string> gather_text(Group& group, const std::string& text) {
  if constexpr (is_detected<group_gather, Group>) {
    return group.gather_to_root(text);
  } else {
    if (group.process_count() == 1) return {text};
    return {text + "(the other processes' replicas are not listed: this group has no gather_to_root)\n"};
  }
}

// The log of a fit of Model by `exec`, written by rank 0; every process must call it.
template <class Strategy, class Model, class Exec>
void log_placement(Exec& exec) {
  using rule = typename Exec::rule;
  using collective = typename Strategy::collective;
  auto& group = exec.group();
  std::string mine;
  for (const observe::ReplicaPlacement& p : exec.placement_records()) mine += observe::replica_line(p) + '\n';
  const std::vector<std::string> texts = gather_text(group, mine);
  if (group.process_rank() != 0) return;

  observe::JobPlacement job;
  job.strategy = strategy_title<Strategy>::get();
  if (exec.deterministic().row_order)
    job.strategy += " in the deterministic row-order mode: the chain GEMM, and every sum over the batch's rows taken "
                    "over all replicas' rows in row order (the same bits for any replica count)";
  if (exec.deterministic().by_units())  // the replicas below are its units
    job.strategy += concat(" in the deterministic mode: each batch split into ", exec.deterministic().units,
                           " units, the logical replicas below, summed in unit order (the same bits for any replica "
                           "count that divides ", exec.deterministic().units, ")");
  job.replicas = exec.replicas();
  job.processes = group.process_count();
  const auto [variables, optimizer_state] = residence<rule, typename Strategy::backend>(exec.global_replicas());
  job.variables = variables;
  job.optimizer_state = optimizer_state;
  job.parameters = Model::kParams;
  job.statistics = Exec::kStats;
  job.collective = collective::kName;
  constexpr CollectiveCall call = collective_call<rule>();
  job.combined = exec.global_replicas() == 1             ? ""
                 : call == CollectiveCall::kAllReduce      ? "all-reduced"
                 : call == CollectiveCall::kReduceToRoot ? "reduced onto replica 0"
                                                         : "reduced shard by shard into the update";
  job.algorithm = describe_collective<collective>(Model::kParams + Exec::kStats, exec.replicas(), job.processes, call);
  if constexpr (is_detected<collective_describe_in_order, collective>)  // the deterministic mode's exchange
    if (exec.deterministic().by_units() && job.processes > 1)
      job.algorithm = collective::describe_in_replica_order(Model::kParams + Exec::kStats, exec.replicas(), job.processes);
  if constexpr (call == CollectiveCall::kAllReduce && !std::is_same_v<typename Strategy::backend, Host>) {
    // The mirrored rule reduces layer by layer where the group takes parts (NCCL).
    if (partial<typename Exec::group_type>::value)
      job.algorithm += "; each layer's gradient as soon as backward produces it, on a second stream";
  }
  for (const std::string& text : texts) {
    std::size_t at = 0;
    for (std::size_t end = text.find('\n'); end != std::string::npos; at = end + 1, end = text.find('\n', at))
      job.replica_lines.push_back(text.substr(at, end - at));
  }
  observe::write_placement(observe::placement_lines(job));
}

}  // namespace lockstep::detail
