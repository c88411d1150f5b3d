// One and several steps of Adam and Sgd against values computed by hand from
// the formulas (Keras' formulation).
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <vector>

#include "lockstep/backend/host/context.hpp"
#include "lockstep/core/rng.hpp"
#include "lockstep/optim/adam.hpp"
#include "lockstep/optim/clipping.hpp"
#include "lockstep/optim/schedules.hpp"
#include "lockstep/optim/sgd.hpp"

using namespace lockstep;

namespace {
// One whole-buffer update, as an executor makes it: prepare, then the ranged step.
template <class State, class Opt>
void update(State& state, const Opt& opt, std::vector<float>& p, const std::vector<float>& g) {
  host::Context ctx;
  state.prepare(opt);
  state.step(ctx, p.data(), g.data(), 0, p.size());
}
}  // namespace

TEST_CASE("Adam: Keras defaults and two steps by hand") {
  const Adam adam;
  CHECK(adam.learning_rate == doctest::Approx(1e-3));
  CHECK(adam.beta_1 == doctest::Approx(0.9));
  CHECK(adam.beta_2 == doctest::Approx(0.999));
  CHECK(adam.epsilon == doctest::Approx(1e-7));

  const Adam opt(0.1, 0.9, 0.999, 1e-7);
  std::vector<float> p = {1.0f, -2.0f}, g = {0.5f, -1.0f};
  Adam::State<host::Context> state(opt, p.size());
  update(state, opt, p, g);
  // t = 1: m = 0.1 g, v = 0.001 g^2, alpha = 0.1 sqrt(0.001) / 0.1, so the step is 0.1 * sign(g) (almost).
  double m0 = 0.1 * 0.5, v0 = 0.001 * 0.25;
  double a1 = 0.1 * std::sqrt(1 - 0.999) / (1 - 0.9);
  double p0 = 1.0 - a1 * m0 / (std::sqrt(v0) + 1e-7);
  CHECK(p[0] == doctest::Approx(p0).epsilon(1e-6));
  CHECK(p[1] == doctest::Approx(-2.0 + a1 * 0.1 / (std::sqrt(0.001) + 1e-7)).epsilon(1e-6));
  // t = 2 with a new gradient.
  g = {0.25f, 0.0f};
  update(state, opt, p, g);
  const double m1 = 0.9 * m0 + 0.1 * 0.25, v1 = 0.999 * v0 + 0.001 * 0.0625;
  const double a2 = 0.1 * std::sqrt(1 - 0.999 * 0.999) / (1 - 0.81);
  CHECK(p[0] == doctest::Approx(p0 - a2 * m1 / (std::sqrt(v1) + 1e-7)).epsilon(1e-6));
  CHECK(state.iterations() == 2);
}

TEST_CASE("Sgd: plain - momentum and nesterov by hand") {
  std::vector<float> g = {2.0f};
  {
    const Sgd opt(0.1);
    std::vector<float> p = {1.0f};
    Sgd::State<host::Context> s(opt, 1);
    update(s, opt, p, g);
    CHECK(p[0] == doctest::Approx(0.8));
  }
  {
    const Sgd opt(0.1, 0.9);
    std::vector<float> p = {1.0f};
    Sgd::State<host::Context> s(opt, 1);
    update(s, opt, p, g);  // v = -0.2, p = 0.8
    update(s, opt, p, g);  // v = 0.9 * -0.2 - 0.2 = -0.38, p = 0.42
    CHECK(p[0] == doctest::Approx(0.42));
  }
  {
    const Sgd opt(0.1, 0.9, true);
    std::vector<float> p = {1.0f};
    Sgd::State<host::Context> s(opt, 1);
    update(s, opt, p, g);  // v = -0.2, p += 0.9 * -0.2 - 0.2 = -0.38 -> 0.62
    CHECK(p[0] == doctest::Approx(0.62));
    update(s, opt, p, g);  // v = -0.38, p += 0.9 * -0.38 - 0.2 = -0.542 -> 0.078
    CHECK(p[0] == doctest::Approx(0.078));
  }
}

TEST_CASE("bad hyper-parameters are errors that name the value") {
  CHECK_THROWS_WITH_AS(Adam(-1.0), doctest::Contains("learning rate -1"), Error);
  CHECK_THROWS_WITH_AS(Adam(1e-3, 1.0), doctest::Contains("beta_1 1"), Error);
  CHECK_THROWS_WITH_AS(Sgd(0.1, 1.5), doctest::Contains("momentum 1.5"), Error);
  // Not finite, or not once kept as a float (1e39 is beyond float's range).
  CHECK_THROWS_WITH_AS(Sgd{INFINITY}, doctest::Contains("learning rate inf, expected a finite number > 0"), Error);
  CHECK_THROWS_WITH_AS(Sgd{NAN}, doctest::Contains("learning rate nan"), Error);
  CHECK_THROWS_WITH_AS(Adam{1e39}, doctest::Contains("learning rate 1e+39"), Error);
  CHECK_THROWS_WITH_AS((Adam{1e-3, 0.9, 0.999, INFINITY}), doctest::Contains("epsilon inf"), Error);
  CHECK_THROWS_WITH_AS((ExponentialDecay{INFINITY, 10, 0.5}), doctest::Contains("expected all finite and > 0"), Error);
  CHECK_THROWS_WITH_AS(PiecewiseConstantDecay({0}, {1.0, INFINITY}), doctest::Contains("value inf"), Error);
  CHECK_THROWS_WITH_AS((CosineDecay{1.0, INFINITY}), doctest::Contains("all finite"), Error);
  CHECK_THROWS_WITH_AS((PolynomialDecay{1.0, 10, INFINITY}), doctest::Contains("all finite"), Error);
  CHECK_NOTHROW(Sgd{3e38});
}

TEST_CASE("Scheduled: a schedule that leaves the finite rates is an Error naming the update, before it is applied") {
  // 1e30 x 1e10^step: update 2's rate, 1e40, is beyond float's range.
  const Scheduled<Sgd, ExponentialDecay> opt{Sgd{}, ExponentialDecay(1e30, 1, 1e10)};
  std::vector<float> p = {1.0f}, g = {0.0f};
  Scheduled<Sgd, ExponentialDecay>::State<host::Context> state(opt, 1);
  update(state, opt, p, g);
  CHECK_THROWS_WITH_AS(update(state, opt, p, g),
                       doctest::Contains("the schedule gave learning rate 1e+40 for update 2, expected"), Error);
  CHECK(p[0] == 1.0f);  // the zero gradient's updates left it; the refused one wrote nothing
}

TEST_CASE("a learning rate changed between steps is used by the next step (the scalars are read when the step runs)") {
  Sgd opt(0.1);
  std::vector<float> p = {1.0f}, g = {2.0f};
  Sgd::State<host::Context> s(opt, 1);
  update(s, opt, p, g);  // 1 - 0.2
  opt.learning_rate = 0.01f;
  update(s, opt, p, g);  // 0.8 - 0.02
  CHECK(p[0] == doctest::Approx(0.78));
  opt.momentum = 0.5f;  // momentum switched on later: the velocity exists already
  update(s, opt, p, g);  // v = -0.02, p = 0.76
  CHECK(p[0] == doctest::Approx(0.76));
  CHECK(s.iterations() == 3);
}

TEST_CASE("AdamW: Keras' defaults; decoupled weight decay before Adam's step; Adam's bits unchanged without it") {
  const AdamW w;
  CHECK(w.weight_decay == doctest::Approx(0.004));
  CHECK(w.learning_rate == doctest::Approx(1e-3));
  AdamW opt(0.1, 0.01);
  std::vector<float> p = {2.0f}, g = {0.5f};
  AdamW::State<host::Context> state(opt, 1);
  update(state, opt, p, g);
  const double decayed = 2.0 - 2.0 * 0.01 * 0.1;
  const double a1 = 0.1 * std::sqrt(1 - 0.999) / (1 - 0.9);
  CHECK(p[0] == doctest::Approx(decayed - a1 * 0.05 / (std::sqrt(0.00025) + 1e-7)).epsilon(1e-6));
  CHECK_THROWS_WITH_AS(AdamW(1e-3, 1.5), doctest::Contains("weight_decay 1.5"), Error);
}

TEST_CASE("schedules follow Keras' formulas") {
  const ExponentialDecay exp_decay(0.1, 10, 0.5), stairs(0.1, 10, 0.5, true);
  CHECK(exp_decay(0) == doctest::Approx(0.1));
  CHECK(exp_decay(5) == doctest::Approx(0.1 * std::pow(0.5, 0.5)));
  CHECK(stairs(15) == doctest::Approx(0.05));
  const PiecewiseConstantDecay piecewise({10, 20}, {1.0, 0.5, 0.1});
  CHECK(piecewise(10) == 1.0);
  CHECK(piecewise(11) == 0.5);
  CHECK(piecewise(21) == 0.1);
  const CosineDecay cosine(1.0, 100, 0.1);
  CHECK(cosine(0) == doctest::Approx(1.0));
  CHECK(cosine(50) == doctest::Approx(0.1 + 0.9 * 0.5));
  CHECK(cosine(200) == doctest::Approx(0.1));
  const CosineDecay warm(0.0, 100, 0.0, 1.0, 10);
  CHECK(warm(5) == doctest::Approx(0.5));
  CHECK(warm(10) == doctest::Approx(1.0));
  CHECK(warm(60) == doctest::Approx(0.5));
  const PolynomialDecay poly(1.0, 10, 0.0, 2.0), cyc(1.0, 10, 0.0, 1.0, true);
  CHECK(poly(5) == doctest::Approx(0.25));
  CHECK(poly(50) == doctest::Approx(0.0));
  CHECK(cyc(15) == doctest::Approx(0.25));
  CHECK_THROWS_WITH_AS(PiecewiseConstantDecay({1, 2}, {1.0}), doctest::Contains("2 boundaries and 1 values"), Error);
}

TEST_CASE("Scheduled<Sgd, ...> takes update t's learning rate from schedule(t - 1)") {
  const Scheduled<Sgd, PiecewiseConstantDecay> opt{Sgd{}, PiecewiseConstantDecay({0}, {1.0, 0.1})};
  std::vector<float> p = {1.0f}, g = {1.0f};
  Scheduled<Sgd, PiecewiseConstantDecay>::State<host::Context> state(opt, 1);
  update(state, opt, p, g);  // schedule(0) = 1.0
  CHECK(p[0] == doctest::Approx(0.0));
  update(state, opt, p, g);  // schedule(1) = 0.1
  CHECK(p[0] == doctest::Approx(-0.1));
  CHECK(state.iterations() == 2);
}

TEST_CASE("GlobalClipNorm scales the gradient by clip / max(norm, clip) before the update") {
  const GlobalClipNorm<Sgd> opt{Sgd{1.0}, 1.0};
  std::vector<float> p = {0.0f, 0.0f}, g = {3.0f, 4.0f};  // norm 5
  GlobalClipNorm<Sgd>::State<host::Context> state(opt, 2);
  update(state, opt, p, g);
  CHECK(p[0] == doctest::Approx(-0.6));
  CHECK(p[1] == doctest::Approx(-0.8));
  std::vector<float> small = {0.3f, 0.4f};  // norm 0.5: untouched
  update(state, opt, p, small);
  CHECK(p[0] == doctest::Approx(-0.9));
  CHECK_THROWS_WITH_AS(GlobalClipNorm<Sgd>(Sgd{}, 0.0), doctest::Contains("global_clipnorm 0"), Error);
  host::Context ctx;
  CHECK_THROWS_WITH_AS(state.step(ctx, p.data(), g.data(), 0, 1), doctest::Contains("needs the whole gradient"), Error);
}

TEST_CASE("ClipNorm scales each variable by clip / max(its norm, clip)") {
  const ClipNorm<Sgd> opt{Sgd{1.0}, 1.0};
  ClipNorm<Sgd>::State<host::Context> state(opt, 4);
  state.set_variables({{0, 2}, {2, 2}});
  std::vector<float> p(4, 0.0f), g = {3.0f, 4.0f, 0.3f, 0.4f};  // norms 5 and 0.5
  update(state, opt, p, g);
  CHECK(p[0] == doctest::Approx(-0.6));
  CHECK(p[1] == doctest::Approx(-0.8));
  CHECK(p[2] == doctest::Approx(-0.3));
  CHECK(p[3] == doctest::Approx(-0.4));
}

TEST_CASE("ClipByGlobalNorm's host loop gives the bits of its per-index kernel") {
  std::vector<float> g(1001);
  for (std::size_t i = 0; i < g.size(); ++i) g[i] = Philox4x32::uniform(5, 0, i) - 0.5f;
  for (const float sum : {0.0f, 0.3f, 1.0f, 37.5f}) {  // norms below, at and above the clip of 1
    CAPTURE(sum);
    std::vector<float> per_index = g, looped = g;
    const kernels::ClipByGlobalNorm a{per_index.data(), &sum, 1.0f}, b{looped.data(), &sum, 1.0f};
    for (std::size_t i = 0; i < g.size(); ++i) a(i);
    static_assert(host::has_host_loop<kernels::ClipByGlobalNorm>::value);
    host::for_each_index(g.size(), b);
    CHECK(per_index == looped);
    CHECK((sum > 1.0f) == (looped != g));  // only a norm above the clip scales
  }
}
