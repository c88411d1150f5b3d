// The finite-difference check of a whole model's backward, shared by the
// layer tests: in double precision, so that the input gradients that flow
// between layers are checked too.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "lockstep/lockstep.hpp"

namespace lockstep::testing {

// Gradients of a model in training mode with the given pass (one replica:
// its sum over replicas is the identity), against central differences.
template <class Model, class Loss, class Label>
void check_gradients(const std::vector<Label>& labels, int rows, Pass pass = Pass{Mode::kTraining}) {
  std::vector<float> init(Model::kParams);
  Model::initialize(init.data(), 5);
  std::vector<double> params(init.begin(), init.end());
  for (std::size_t i = 0; i < params.size(); ++i)  // non-zero biases too
    params[i] += 0.1 * (Philox4x32::uniform(9, 0, i) - 0.5);
  std::vector<double> x(static_cast<std::size_t>(rows) * Model::kInputs);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = 2.0 * Philox4x32::uniform(11, 0, i) - 1.0;
  const double scale = 1.0 / rows;

  host::Context ctx;
  std::vector<float> state_init(Model::kState);
  Model::initialize_state(state_init.data());
  std::vector<double> state(state_init.begin(), state_init.end());
  typename Model::template BasicWorkspace<double> ws(rows);
  std::vector<double> row_loss(static_cast<std::size_t>(rows));
  auto loss_of = [&](const std::vector<double>& p) {
    const double* out = Model::forward(ctx, pass, p.data(), state.data(), x.data(), rows, ws);
    Loss::template forward_backward<Model::kOutputs>(ctx, out, labels.data(), rows, scale, row_loss.data(),
                                                     static_cast<double*>(nullptr));
    double s = 0;
    for (double l : row_loss) s += l * scale;
    return s;
  };

  std::vector<double> grads(Model::kParams);
  const double* out = Model::forward(ctx, pass, params.data(), state.data(), x.data(), rows, ws);
  Loss::template forward_backward<Model::kOutputs>(ctx, out, labels.data(), rows, scale, row_loss.data(),
                                                   ws.output_grad());
  std::size_t ready = 0;
  Model::backward(ctx, pass, params.data(), state.data(), x.data(), rows, ws, grads.data(),
                  [&](std::size_t, std::size_t n) { ready += n; });
  CHECK(ready == Model::kParams);  // every layer reported its gradient once

  double worst = 0;
  const double h = 1e-6;
  for (std::size_t i = 0; i < params.size(); ++i) {
    auto p = params;
    p[i] += h;
    const double up = loss_of(p);
    p[i] -= 2 * h;
    const double down = loss_of(p);
    const double numeric = (up - down) / (2 * h);
    worst = std::max(worst, std::abs(numeric - grads[i]) / std::max(1.0, std::abs(numeric)));
  }
  CHECK(worst < 1e-6);
}

}  // namespace lockstep::testing
