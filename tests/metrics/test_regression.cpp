// Regression end to end: a CSV with float targets, MeanSquaredError trained
// with MeanAbsoluteError, MeanSquaredError and RootMeanSquaredError reported
// under Keras' names, each equal to its definition over the data.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "data/temp_dir.hpp"
#include "lockstep/lockstep.hpp"
#include "train/test_helpers.hpp"

using namespace lockstep;

TEST_CASE("read_csv_regression: float targets from the named columns, in that order") {
  testing::TempDir dir;
  const std::string path = dir.file("r.csv");
  std::ofstream(path) << "x0,t1,x1,t0\n1,0.5,2,-1.25\n3,1.5,4,2e-1\n";
  CsvOptions options;
  options.header = true;
  options.target_columns = {3, 1};
  const RegressionDataset d = read_csv_regression(path, options);
  CHECK(d.size() == 2);
  CHECK(d.feature_count() == 2);
  CHECK(d.label_width() == 2);
  CHECK(d.feature_data() == std::vector<float>{1, 2, 3, 4});
  CHECK(d.label_data() == std::vector<float>{-1.25f, 0.5f, 0.2f, 1.5f});
  CsvOptions header_only;
  header_only.header = true;
  const RegressionDataset last = read_csv_regression(path, header_only);
  CHECK(last.label_width() == 1);
  CHECK(last.label_data() == std::vector<float>{-1.25f, 0.2f});

  options.target_columns = {1, 1};
  CHECK_THROWS_WITH_AS(read_csv_regression(path, options), doctest::Contains("target column 1 is named twice"), Error);
  options.target_columns = {7};
  CHECK_THROWS_WITH_AS(read_csv_regression(path, options), doctest::Contains("target column 7 (0-based) is outside"),
                       Error);
  options.target_columns = {0, 1, 2, 3};
  CHECK_THROWS_WITH_AS(read_csv_regression(path, options), doctest::Contains("expected at least one feature"), Error);
  std::ofstream(dir.file("nan.csv")) << "1,nan\n";
  CHECK_THROWS_WITH_AS(read_csv_regression(dir.file("nan.csv")), doctest::Contains("\"nan\" is not a finite number"),
                       Error);
  CsvOptions scaled;
  scaled.feature_scale = 0.0f;
  CHECK_THROWS_WITH_AS(read_csv(path, scaled), doctest::Contains("feature_scale is 0"), Error);
}

TEST_CASE("regression metrics under Keras' names equal their definitions") {
  const RegressionDataset data = testing::half_difference_dataset(50);
  using Model = Sequential<Input<2>, Dense<4, Tanh>, Dense<1>>;
  Model model{3};
  using Fit = Trainer<MirroredPolicy<HostAllReduce>, Adam, MeanSquaredError,
                      Metrics<MeanAbsoluteError, MeanSquaredError, RootMeanSquaredError>>;
  Fit trainer{MirroredPolicy<HostAllReduce>{2}, Adam{0.01}};
  BasicFitOptions<float> options;
  options.epochs = 2;
  options.batch_size = 16;
  options.verbose = false;
  trainer.fit(model, data, options);
  const Logs logs = trainer.evaluate(model, data, 7);
  const std::vector<float> y = trainer.predict(model, data);
  double abs_sum = 0, sq_sum = 0;
  for (std::size_t i = 0; i < data.size(); ++i) {
    const double d = static_cast<double>(y[i]) - data.label_data()[i];
    abs_sum += std::abs(d);
    sq_sum += d * d;
  }
  const double n = static_cast<double>(data.size());
  CHECK(logs["mean_absolute_error"] == doctest::Approx(abs_sum / n).epsilon(1e-5));
  CHECK(logs["mean_squared_error"] == doctest::Approx(sq_sum / n).epsilon(1e-5));
  CHECK(logs["root_mean_squared_error"] == doctest::Approx(std::sqrt(sq_sum / n)).epsilon(1e-5));
  CHECK(logs["loss"] == doctest::Approx(sq_sum / n).epsilon(1e-5));
}
