// Tests for the CSV reader in lockstep/data/csv.hpp.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>

#include "lockstep/data/csv.hpp"
#include "data/temp_dir.hpp"

namespace {

namespace fs = std::filesystem;

// One file in a fresh directory, removed with it when the test case ends.
class TempCsv {
 public:
  explicit TempCsv(const std::string& contents) : path_(dir_.file("data.csv")) {
    std::FILE* file = std::fopen(path_.c_str(), "wb");
    REQUIRE(file != nullptr);
    REQUIRE(std::fwrite(contents.data(), 1, contents.size(), file) == contents.size());
    REQUIRE(std::fclose(file) == 0);
  }
  const std::string& path() const { return path_; }

 private:
  lockstep::testing::TempDir dir_{"lockstep_test_csv"};
  std::string path_;
};

// read_csv of a file holding `contents`, whose first line is a header.
lockstep::Dataset read_with_header(const std::string& contents) {
  TempCsv csv(contents);
  lockstep::CsvOptions options;
  options.header = true;
  return lockstep::read_csv(csv.path(), options);
}

}  // namespace

TEST_CASE("read_csv round-trips features and a last-column label - skipping a header") {
  const lockstep::Dataset data = read_with_header("x1,x2,x3,label\n0.5,1,-2.25,3\n 4e-1 , 7 ,0,0\n\n1.5,2.5,3.5,12\n");
  REQUIRE(data.size() == 3);
  CHECK(data.feature_count() == 3);
  CHECK(data.label(0) == 3);
  CHECK(data.label(1) == 0);
  CHECK(data.label(2) == 12);
  CHECK(data.features(0)[0] == 0.5f);
  CHECK(data.features(0)[1] == 1.0f);
  CHECK(data.features(0)[2] == -2.25f);
  CHECK(data.features(1)[0] == 0.4f);
  CHECK(data.features(1)[1] == 7.0f);
  CHECK(data.features(2)[2] == 3.5f);
}

TEST_CASE("read_csv takes the label from column 0 and applies feature_scale") {
  TempCsv csv("7,0,255,51\n2,255,0,102");  // no trailing newline
  lockstep::CsvOptions options;
  options.label_column = 0;
  options.feature_scale = 1.0f / 255.0f;
  const lockstep::Dataset data = lockstep::read_csv(csv.path(), options);
  REQUIRE(data.size() == 2);
  CHECK(data.feature_count() == 3);
  CHECK(data.label(0) == 7);
  CHECK(data.label(1) == 2);
  CHECK(data.features(0)[0] == 0.0f);
  CHECK(data.features(0)[1] == doctest::Approx(1.0f));
  CHECK(data.features(1)[2] == doctest::Approx(0.4f));
}

TEST_CASE("read_csv takes a label from a middle column and another delimiter") {
  TempCsv csv("1.0;5;2.0\n3.0;6;4.0\n");
  lockstep::CsvOptions options;
  options.label_column = 1;
  options.delimiter = ';';
  const lockstep::Dataset data = lockstep::read_csv(csv.path(), options);
  REQUIRE(data.size() == 2);
  CHECK(data.label(1) == 6);
  CHECK(data.features(1)[0] == 3.0f);
  CHECK(data.features(1)[1] == 4.0f);
}

TEST_CASE("read_csv reads numbers and labels enclosed in double quotes, as csv.QUOTE_ALL writes them") {
  const lockstep::Dataset data = read_with_header("\"x\",\"y\",\"label\"\n\"1.5\",\" 2\",\"1\"\n3,\"-4e1\",0\n");
  REQUIRE(data.size() == 2);
  CHECK(data.features(0)[0] == 1.5f);
  CHECK(data.features(0)[1] == 2.0f);
  CHECK(data.label(0) == 1);
  CHECK(data.features(1)[1] == -40.0f);
  // A quote does not protect a delimiter: the row has a field too many.
  TempCsv split("1,2,0\n\"3,5\",4,1\n");
  CHECK_THROWS_WITH_AS(lockstep::read_csv(split.path()), doctest::Contains("row has 4 fields, expected 3"),
                       lockstep::Error);
  TempCsv empty("\"\",2,0\n");
  CHECK_THROWS_WITH_AS(lockstep::read_csv(empty.path()), doctest::Contains("line 1, column 1: empty field"),
                       lockstep::Error);
}

TEST_CASE("a delimiter that cannot separate numbers is an Error naming it") {
  TempCsv csv("1,2,0\n");
  lockstep::CsvOptions options;
  for (const char bad : {'\n', '\r', '"', '1', '.', '-', 'e', '\0'}) {
    options.delimiter = bad;
    CHECK_THROWS_WITH_AS(lockstep::read_csv(csv.path(), options),
                         doctest::Contains("CsvOptions::delimiter is '"), lockstep::Error);
  }
  options.delimiter = '\n';
  CHECK_THROWS_WITH_AS(lockstep::read_csv(csv.path(), options),
                       doctest::Contains("CsvOptions::delimiter is '\\n', expected a character that separates"),
                       lockstep::Error);
  options.delimiter = '\t';  // the first row then has 1 field; the message shows the tab as \t
  CHECK_THROWS_WITH_AS(lockstep::read_csv(csv.path(), options), doctest::Contains("is the delimiter '\\t'?"),
                       lockstep::Error);
}

TEST_CASE("read_csv accepts CRLF line ends and blank lines") {
  const lockstep::Dataset data = read_with_header("a,b,y\r\n1,2,0\r\n\r\n3,4,1\r\n\r\n");
  REQUIRE(data.size() == 2);
  CHECK(data.features(1)[1] == 4.0f);
  CHECK(data.label(1) == 1);
}

TEST_CASE("a non-numeric field names the line - column and text") {
  TempCsv csv("1,2,0\n3,abc,1\n");
  CHECK_THROWS_WITH_AS(lockstep::read_csv(csv.path()),
                       doctest::Contains("line 2, column 2: \"abc\" is not a number"),
                       lockstep::Error);
  CHECK_THROWS_WITH_AS(lockstep::read_csv(csv.path()), doctest::Contains(csv.path().c_str()),
                       lockstep::Error);
}

TEST_CASE("a number followed by junk is rejected - as are empty fields and NaN") {
  SUBCASE("junk") {
    TempCsv csv("1.5x,2,0\n");
    CHECK_THROWS_WITH_AS(lockstep::read_csv(csv.path()),
                         doctest::Contains("line 1, column 1: \"1.5x\" is not a number"),
                         lockstep::Error);
  }
  SUBCASE("empty") {
    TempCsv csv("1,2,0\n1, ,0\n");
    CHECK_THROWS_WITH_AS(lockstep::read_csv(csv.path()),
                         doctest::Contains("line 2, column 2: empty field"), lockstep::Error);
  }
  SUBCASE("nan") {
    TempCsv csv("1,nan,0\n");
    CHECK_THROWS_WITH_AS(lockstep::read_csv(csv.path()),
                         doctest::Contains("line 1, column 2: \"nan\" is not a finite number"),
                         lockstep::Error);
  }
}

TEST_CASE("a ragged row names both field counts") {
  SUBCASE("too few") {
    TempCsv csv("1,2,3,0\n4,5,6,1\n7,8,1\n");
    CHECK_THROWS_WITH_AS(lockstep::read_csv(csv.path()),
                         doctest::Contains("line 3, column 4: row has 3 fields, expected 4"),
                         lockstep::Error);
  }
  SUBCASE("too many") {
    CHECK_THROWS_WITH_AS(read_with_header("h1,h2,h3\n1,2,0\n\n3,4,5,1\n"),
                         doctest::Contains("line 4, column 4: row has 4 fields, expected 3 (as in "
                                           "the first data row, line 2)"),
                         lockstep::Error);
  }
}

TEST_CASE("a label that is not a non-negative integer is rejected") {
  for (const char* label : {"-1", "2.5", "1e3", "x", "99999999999"}) {
    CAPTURE(label);
    TempCsv csv(std::string("1,2,0\n3,4,") + label + "\n");
    CHECK_THROWS_WITH_AS(lockstep::read_csv(csv.path()),
                         doctest::Contains((std::string("line 2, column 3: label \"") + label +
                                            "\" is not a non-negative integer")
                                               .c_str()),
                         lockstep::Error);
  }
}

TEST_CASE("a label column outside the row is rejected") {
  TempCsv csv("1,2,0\n");
  lockstep::CsvOptions options;
  options.label_column = 3;
  CHECK_THROWS_WITH_AS(lockstep::read_csv(csv.path(), options),
                       doctest::Contains("label column 3 (0-based) is outside the 3 fields"),
                       lockstep::Error);
  options.label_column = -2;
  CHECK_THROWS_WITH_AS(lockstep::read_csv(csv.path(), options),
                       doctest::Contains("label_column is -2"), lockstep::Error);
}

TEST_CASE("a file without data rows is an Error") {
  SUBCASE("empty") {
    TempCsv csv("");
    CHECK_THROWS_WITH_AS(lockstep::read_csv(csv.path()), doctest::Contains("no data rows"),
                         lockstep::Error);
  }
  SUBCASE("blank lines only") {
    TempCsv csv("\n\r\n  \n");
    CHECK_THROWS_WITH_AS(lockstep::read_csv(csv.path()), doctest::Contains("no data rows"),
                         lockstep::Error);
  }
  SUBCASE("header only") {
    CHECK_THROWS_WITH_AS(read_with_header("a,b,label\n"),
                         doctest::Contains("no data rows (the file is empty or holds only a header)"),
                         lockstep::Error);
  }
  SUBCASE("one column") {
    TempCsv csv("1\n2\n");
    CHECK_THROWS_WITH_AS(lockstep::read_csv(csv.path()),
                         doctest::Contains("expected at least 2 (features and a label)"),
                         lockstep::Error);
  }
}

TEST_CASE("a missing CSV file names the path") {
  const std::string path =
      (fs::temp_directory_path() / "lockstep_test_csv_no_such_dir" / "missing.csv").string();
  CHECK_THROWS_WITH_AS(lockstep::read_csv(path),
                       doctest::Contains((path + ": file does not exist").c_str()), lockstep::Error);
}
