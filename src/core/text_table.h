#pragma once
// A plain-text table: left-aligned text columns, right-aligned numbers.
#include <ostream>
#include <string>
#include <vector>

namespace dlscale {

enum class Align { kLeft, kRight };

class TextTable {
 public:
  /// One column per header; `align` defaults to left for every column.
  explicit TextTable(std::vector<std::string> headers, std::vector<Align> align = {});
  /// Appends a row; throws InternalError if its width differs from the header's.
  void add_row(std::vector<std::string> cells);
  /// Renders header, a rule, and the rows; columns separated by two spaces.
  void print(std::ostream& out) const;

 private:
  std::vector<std::string> headers_;
  std::vector<Align> align_;
  std::vector<std::vector<std::string>> rows_;
};

/// 25557032 -> "25,557,032".
std::string with_thousands(long long value);

}  // namespace dlscale
