// One and several steps of Adam and Sgd against values computed by hand from
// the formulas (Keras' formulation).
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "lockstep/optim/adam.hpp"
#include "lockstep/optim/sgd.hpp"

using namespace lockstep;

TEST_CASE("Adam: Keras defaults and two steps by hand") {
  const Adam adam;
  CHECK(adam.learning_rate == doctest::Approx(1e-3));
  CHECK(adam.beta_1 == doctest::Approx(0.9));
  CHECK(adam.beta_2 == doctest::Approx(0.999));
  CHECK(adam.epsilon == doctest::Approx(1e-7));

  const Adam opt(0.1, 0.9, 0.999, 1e-7);
  std::vector<float> p = {1.0f, -2.0f}, g = {0.5f, -1.0f};
  Adam::State<Host> state(opt, p.size());
  state.step(opt, p.data(), g.data());
  // t = 1: m = 0.1 g, v = 0.001 g^2, alpha = 0.1 sqrt(0.001) / 0.1, so the step is 0.1 * sign(g) (almost).
  double m0 = 0.1 * 0.5, v0 = 0.001 * 0.25;
  double a1 = 0.1 * std::sqrt(1 - 0.999) / (1 - 0.9);
  double p0 = 1.0 - a1 * m0 / (std::sqrt(v0) + 1e-7);
  CHECK(p[0] == doctest::Approx(p0).epsilon(1e-6));
  CHECK(p[1] == doctest::Approx(-2.0 + a1 * 0.1 / (std::sqrt(0.001) + 1e-7)).epsilon(1e-6));
  // t = 2 with a new gradient.
  g = {0.25f, 0.0f};
  state.step(opt, p.data(), g.data());
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
    Sgd::State<Host> s(opt, 1);
    s.step(opt, p.data(), g.data());
    CHECK(p[0] == doctest::Approx(0.8));
  }
  {
    const Sgd opt(0.1, 0.9);
    std::vector<float> p = {1.0f};
    Sgd::State<Host> s(opt, 1);
    s.step(opt, p.data(), g.data());  // v = -0.2, p = 0.8
    s.step(opt, p.data(), g.data());  // v = 0.9 * -0.2 - 0.2 = -0.38, p = 0.42
    CHECK(p[0] == doctest::Approx(0.42));
  }
  {
    const Sgd opt(0.1, 0.9, true);
    std::vector<float> p = {1.0f};
    Sgd::State<Host> s(opt, 1);
    s.step(opt, p.data(), g.data());  // v = -0.2, p += 0.9 * -0.2 - 0.2 = -0.38 -> 0.62
    CHECK(p[0] == doctest::Approx(0.62));
    s.step(opt, p.data(), g.data());  // v = -0.38, p += 0.9 * -0.38 - 0.2 = -0.542 -> 0.078
    CHECK(p[0] == doctest::Approx(0.078));
  }
}

TEST_CASE("bad hyper-parameters are errors that name the value") {
  CHECK_THROWS_WITH_AS(Adam(-1.0), doctest::Contains("learning rate -1"), Error);
  CHECK_THROWS_WITH_AS(Adam(1e-3, 1.0), doctest::Contains("beta_1 1"), Error);
  CHECK_THROWS_WITH_AS(Sgd(0.1, 1.5), doctest::Contains("momentum 1.5"), Error);
}
