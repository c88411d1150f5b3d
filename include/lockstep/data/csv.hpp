// Reader for numeric CSV files, one sample per row: float features and one
// integer class label (read_csv, a Dataset), or one or several float targets
// (read_csv_regression, a RegressionDataset).
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
#include <type_traits>
#include <utility>
#include <vector>

#include "lockstep/core/error.hpp"
#include "lockstep/core/input_file.hpp"
#include "lockstep/data/dataset.hpp"

namespace lockstep {

struct CsvOptions {
  int label_column = -1;  // 0-based; -1 = last column
  bool header = false;    // skip the first non-blank line
  char delimiter = ',';
  float feature_scale = 1.0f;  // every feature is multiplied by this (1/255 for pixels)
  // read_csv_regression: the 0-based columns of the targets, in this order;
  // empty means the last column alone.
  std::vector<int> target_columns;
};

namespace detail {

// Only a regular file: a FIFO or /dev/zero would block or never end.
inline std::string csv_read_file(const std::string& path) { return read_regular_file(path, "a CSV file"); }

inline bool csv_is_space(char c) { return c == ' ' || c == '\t'; }

// [first, last) without surrounding spaces and tabs.
inline void csv_trim(const char*& first, const char*& last) {
  while (first < last && csv_is_space(*first)) ++first;
  while (last > first && csv_is_space(last[-1])) --last;
}

// A delimiter as a message shows it: 'x', or an escape for control characters.
inline std::string csv_char_text(char c) {
  if (c == '\n') return "'\\n'";
  if (c == '\r') return "'\\r'";
  if (c == '\t') return "'\\t'";
  if (c == '\0') return "'\\0'";
  return std::string("'") + c + "'";
}

// A field's text without the double quotes that enclose it, if any.
inline void csv_unquote(const char*& first, const char*& last) {
  if (last - first >= 2 && *first == '"' && last[-1] == '"') {
    ++first;
    --last;
    csv_trim(first, last);
  }
}

inline std::string csv_quote(const char* first, const char* last) {
  return "\"" + std::string(first, last) + "\"";
}

// The label of a classification CSV: digits only, since a label is a class
// index ("-1", "2.5" and "1e3" are all rejected).
inline bool csv_class_label(const char* a, const char* b, std::int32_t& out) {
  std::int64_t value = 0;
  const char* p = a;
  if (*p == '+') ++p;
  bool ok = p < b;
  for (; ok && p < b; ++p) {
    ok = *p >= '0' && *p <= '9';
    if (ok) value = value * 10 + (*p - '0');
    ok = ok && value <= std::numeric_limits<std::int32_t>::max();
  }
  out = static_cast<std::int32_t>(value);
  return ok;
}

// A field may be enclosed in double quotes ("1.5", as csv.QUOTE_ALL or
// QUOTE_NONNUMERIC write numbers); quotes do not protect a delimiter inside a
// field. Spaces around a field are allowed. Blank lines are skipped, CRLF
// line ends accepted. Every row must have as many fields as the
// first. Label is int32 (one class-index column) or float (target columns).
template <class Label>
BasicDataset<Label> read_csv_as(const std::string& path, const CsvOptions& options) {
  constexpr bool kClasses = std::is_same_v<Label, std::int32_t>;
  require(options.label_column >= -1, path, ": CsvOptions::label_column is ", options.label_column,
          ", expected -1 (last column) or a 0-based column index");
  require(std::isfinite(options.feature_scale) && options.feature_scale != 0.0f, path,
          ": CsvOptions::feature_scale is ", options.feature_scale, ", expected a finite, non-zero factor");
  for (int c : options.target_columns)
    require(c >= 0, path, ": CsvOptions::target_columns has ", c, ", expected 0-based column indices");
  const char d = options.delimiter;
  require(d != '\n' && d != '\r' && d != '"' && d != '\0' && std::strchr("0123456789.+-eE", d) == nullptr, path,
          ": CsvOptions::delimiter is ", detail::csv_char_text(d),
          ", expected a character that separates numbers, such as ',', ';' or '\\t'");
  const std::string text = detail::csv_read_file(path);

  const char* cursor = text.data();
  const char* const end = text.data() + text.size();
  // Spreadsheet exports often start with a UTF-8 byte order mark.
  if (text.size() >= 3 && std::memcmp(cursor, "\xEF\xBB\xBF", 3) == 0) cursor += 3;

  std::vector<float> features;
  std::vector<Label> labels;
  std::size_t field_count = 0;  // from the first data row
  std::size_t first_row_line = 0;
  std::vector<std::size_t> label_columns;  // in the order the labels are stored
  std::vector<Label> row_labels;
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
              " at least 2 (features and a label); is the delimiter ", detail::csv_char_text(options.delimiter), "?");
      std::vector<int> asked = kClasses ? std::vector<int>{options.label_column} : options.target_columns;
      if (asked.empty()) asked.push_back(-1);
      for (int c : asked) {
        const std::size_t column = c == -1 ? field_count - 1 : static_cast<std::size_t>(c);
        require(column < field_count, path, ": line ", line, ": ", kClasses ? "label" : "target", " column ", c,
                " (0-based) is outside the ", field_count, " fields of the first data row");
        for (std::size_t seen : label_columns)
          require(seen != column, path, ": target column ", column, " is named twice");
        label_columns.push_back(column);
      }
      require(label_columns.size() < field_count, path, ": line ", line, ": all ", field_count,
              " fields are targets, expected at least one feature");
      row_labels.resize(label_columns.size());
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
      detail::csv_unquote(a, b);
      require(a < b, path, ": line ", line, ", column ", column + 1,
              ": empty field, expected a number");
      std::size_t target = label_columns.size();
      for (std::size_t t = 0; t < label_columns.size(); ++t)
        if (label_columns[t] == column) target = t;
      if constexpr (kClasses) {
        if (target < label_columns.size()) {
          std::int32_t value = 0;
          require(detail::csv_class_label(a, b, value), path, ": line ", line, ", column ", column + 1, ": label ",
                  detail::csv_quote(a, b), " is not a non-negative integer class index");
          row_labels[target] = value;
          continue;
        }
      }
      field.assign(a, b);
      char* parsed_end = nullptr;
      const float value = std::strtof(field.c_str(), &parsed_end);
      require(parsed_end == field.c_str() + field.size(), path, ": line ", line, ", column ", column + 1, ": ",
              detail::csv_quote(a, b), " is not a number");
      // NaN or infinity (including overflow) would silently poison training.
      require(std::isfinite(value), path, ": line ", line, ", column ", column + 1, ": ", detail::csv_quote(a, b),
              " is not a finite number");
      if (target < label_columns.size())
        row_labels[target] = static_cast<Label>(value);
      else
        features.push_back(value * options.feature_scale);
    }
    labels.insert(labels.end(), row_labels.begin(), row_labels.end());
  }

  require(!labels.empty(), path, ": no data rows",
          options.header ? " (the file is empty or holds only a header)" : " (the file is empty)");
  const std::size_t width = label_columns.size();
  return BasicDataset<Label>(std::move(features), field_count - width, std::move(labels), width);
}

}  // namespace detail

// A classification CSV: float features and one integer class label per row.
inline Dataset read_csv(const std::string& path, const CsvOptions& options = {}) {
  return detail::read_csv_as<std::int32_t>(path, options);
}

// A regression CSV: float features and the float targets named by
// options.target_columns (the last column by default) per row.
inline RegressionDataset read_csv_regression(const std::string& path, const CsvOptions& options = {}) {
  return detail::read_csv_as<float>(path, options);
}

}  // namespace lockstep
