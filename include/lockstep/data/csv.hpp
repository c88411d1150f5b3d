// Reader for numeric CSV files, one sample per row: float features and one
// integer class label, into a Dataset.
#pragma once

#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "lockstep/core/error.hpp"
#include "lockstep/data/dataset.hpp"

namespace lockstep {

struct CsvOptions {
  int label_column = -1;  // 0-based; -1 = last column
  bool header = false;    // skip the first non-blank line
  char delimiter = ',';
  float feature_scale = 1.0f;  // every feature is multiplied by this (1/255 for pixels)
};

namespace detail {

inline std::string csv_read_file(const std::string& path) {
  errno = 0;
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (!file) {
    const int err = errno;
    if (err == ENOENT) fail(path, ": file does not exist");
    fail(path, ": file cannot be opened: ", std::strerror(err));
  }
  std::string text;
  char buffer[1 << 16];
  std::size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, file)) > 0) text.append(buffer, n);
  const bool failed = std::ferror(file) != 0;
  const int err = errno;
  std::fclose(file);
  require(!failed, path, ": read failed: ", std::strerror(err));
  return text;
}

inline bool csv_is_space(char c) { return c == ' ' || c == '\t'; }

// [first, last) without surrounding spaces and tabs.
inline void csv_trim(const char*& first, const char*& last) {
  while (first < last && csv_is_space(*first)) ++first;
  while (last > first && csv_is_space(last[-1])) --last;
}

inline std::string csv_quote(const char* first, const char* last) {
  return "\"" + std::string(first, last) + "\"";
}

}  // namespace detail

// Fields are not quoted; spaces around a field are allowed. Blank lines are
// skipped, CRLF line ends accepted. Every row must have as many fields as the first.
inline Dataset read_csv(const std::string& path, const CsvOptions& options = {}) {
  require(options.label_column >= -1, path, ": CsvOptions::label_column is ", options.label_column,
          ", expected -1 (last column) or a 0-based column index");
  const std::string text = detail::csv_read_file(path);

  const char* cursor = text.data();
  const char* const end = text.data() + text.size();
  // Spreadsheet exports often start with a UTF-8 byte order mark.
  if (text.size() >= 3 && std::memcmp(cursor, "\xEF\xBB\xBF", 3) == 0) cursor += 3;

  std::vector<float> features;
  std::vector<Dataset::label_type> labels;
  std::size_t field_count = 0;  // from the first data row
  std::size_t first_row_line = 0;
  std::size_t label_index = 0;
  bool header_pending = options.header;
  std::string field;  // strtof needs a terminated copy; reused to avoid allocations

  for (std::size_t line = 1; cursor < end; ++line) {
    const char* line_end = static_cast<const char*>(
        std::memchr(cursor, '\n', static_cast<std::size_t>(end - cursor)));
    if (!line_end) line_end = end;
    const char* first = cursor;
    const char* last = line_end;
    cursor = line_end < end ? line_end + 1 : end;
    if (last > first && last[-1] == '\r') --last;

    const char* probe_first = first;
    const char* probe_last = last;
    detail::csv_trim(probe_first, probe_last);
    if (probe_first == probe_last) continue;
    if (header_pending) {
      header_pending = false;
      continue;
    }

    std::size_t fields = 1;
    for (const char* p = first; p < last; ++p) fields += *p == options.delimiter;
    if (field_count == 0) {
      field_count = fields;
      first_row_line = line;
      require(field_count >= 2, path, ": line ", line, ": the first data row has 1 field, expected",
              " at least 2 (features and a label); is the delimiter '", options.delimiter, "'?");
      if (options.label_column == -1) {
        label_index = field_count - 1;
      } else {
        label_index = static_cast<std::size_t>(options.label_column);
        require(label_index < field_count, path, ": line ", line, ": label column ",
                options.label_column, " (0-based) is outside the ", field_count,
                " fields of the first data row");
      }
    }
    require(fields == field_count, path, ": line ", line, ", column ",
            (fields < field_count ? fields : field_count) + 1, ": row has ", fields,
            " fields, expected ", field_count, " (as in the first data row, line ", first_row_line,
            ")");

    const char* field_first = first;
    for (std::size_t column = 0; column < field_count; ++column) {
      const char* field_last = field_first;
      while (field_last < last && *field_last != options.delimiter) ++field_last;
      const char* a = field_first;
      const char* b = field_last;
      field_first = field_last < last ? field_last + 1 : last;
      detail::csv_trim(a, b);
      require(a < b, path, ": line ", line, ", column ", column + 1,
              ": empty field, expected a number");
      if (column == label_index) {
        // Digits only: "-1", "2.5" and "1e3" are all rejected, since a label is a class index.
        std::int64_t value = 0;
        const char* p = a;
        if (*p == '+') ++p;
        bool ok = p < b;
        for (; ok && p < b; ++p) {
          ok = *p >= '0' && *p <= '9';
          if (ok) value = value * 10 + (*p - '0');
          ok = ok && value <= std::numeric_limits<Dataset::label_type>::max();
        }
        require(ok, path, ": line ", line, ", column ", column + 1, ": label ",
                detail::csv_quote(a, b), " is not a non-negative integer class index");
        labels.push_back(static_cast<Dataset::label_type>(value));
      } else {
        field.assign(a, b);
        char* parsed_end = nullptr;
        const float value = std::strtof(field.c_str(), &parsed_end);
        require(parsed_end == field.c_str() + field.size(), path, ": line ", line, ", column ",
                column + 1, ": ", detail::csv_quote(a, b), " is not a number");
        // NaN or infinity (including overflow) would silently poison training.
        require(std::isfinite(value), path, ": line ", line, ", column ", column + 1, ": ",
                detail::csv_quote(a, b), " is not a finite number");
        features.push_back(value * options.feature_scale);
      }
    }
  }

  require(!labels.empty(), path, ": no data rows",
          options.header ? " (the file is empty or holds only a header)" : " (the file is empty)");
  return Dataset(std::move(features), field_count - 1, std::move(labels));
}

}  // namespace lockstep
