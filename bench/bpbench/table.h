// Result rows and their three renderings: an aligned text table for people,
// CSV (one header row) and JSON (one object per line) for scripts.
#pragma once

#include "cli.h"

#include <cstdint>
#include <string>
#include <vector>

namespace bpbench {

struct Field {
  std::string key;
  std::string text;  // as printed
  bool number;       // unquoted in JSON, right-aligned in the table
};

class Row {
 public:
  Row& add(const std::string& key, const std::string& text);  // a string
  Row& add(const std::string& key, double value, int decimals);
  Row& add(const std::string& key, uint64_t value);
  Row& addRaw(const std::string& key, const std::string& numberText);  // number, as given
  const std::vector<Field>& fields() const { return fields_; }
  const Field* find(const std::string& key) const;

 private:
  std::vector<Field> fields_;
};

// A column of the text table: which field, under which heading.
struct Column {
  std::string key;
  std::string heading;
};

// Prints rows to stdout. The text table shows `columns` only (every field
// when empty); CSV and JSON have every field of the first row except the
// display-only ones, whose key starts with '_'.
void printRows(const std::vector<Row>& rows, Format format, const std::vector<Column>& columns,
               const std::vector<std::string>& notes = {});

std::string formatFixed(double v, int decimals);
std::string hex16(uint64_t v);
// Prints a --check failure block on stderr, loud enough to see in a CI log;
// returns the exit code: 1 if there were failures, else 0.
int printFailures(const std::vector<std::string>& failures);

}  // namespace bpbench
