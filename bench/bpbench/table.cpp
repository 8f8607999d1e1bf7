#include "table.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>

namespace bpbench {

std::string formatFixed(double v, int decimals) {
  if (!std::isfinite(v)) return "nan";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string hex16(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
  return buf;
}

Row& Row::add(const std::string& key, const std::string& text) {
  fields_.push_back({key, text, false});
  return *this;
}
Row& Row::add(const std::string& key, double value, int decimals) {
  fields_.push_back({key, formatFixed(value, decimals), std::isfinite(value)});
  return *this;
}
Row& Row::add(const std::string& key, uint64_t value) {
  fields_.push_back({key, std::to_string(value), true});
  return *this;
}
Row& Row::addRaw(const std::string& key, const std::string& numberText) {
  fields_.push_back({key, numberText, true});
  return *this;
}
const Field* Row::find(const std::string& key) const {
  for (const Field& f : fields_)
    if (f.key == key) return &f;
  return nullptr;
}

namespace {

std::string csvCell(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string jsonString(const std::string& s) {
  std::string q = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      q += '\\', q += c;
    else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      q += buf;
    } else
      q += c;
  }
  return q + "\"";
}

}  // namespace

void printRows(const std::vector<Row>& rows, Format format, const std::vector<Column>& columns,
               const std::vector<std::string>& notes) {
  if (rows.empty()) return;
  // The columns: every key of any row, in the order of first appearance (a
  // row without one leaves its cell empty).
  std::vector<std::string> keys;
  for (const Row& r : rows)
    for (const Field& f : r.fields())
      if (f.key[0] != '_' && std::find(keys.begin(), keys.end(), f.key) == keys.end())
        keys.push_back(f.key);
  if (format == Format::csv) {
    for (size_t i = 0; i < keys.size(); ++i)
      std::printf("%s%s", i ? "," : "", csvCell(keys[i]).c_str());
    std::printf("\n");
    for (const Row& r : rows) {
      for (size_t i = 0; i < keys.size(); ++i) {
        const Field* f = r.find(keys[i]);
        std::printf("%s%s", i ? "," : "", f ? csvCell(f->text).c_str() : "");
      }
      std::printf("\n");
    }
    std::fflush(stdout);
    return;
  }
  if (format == Format::json) {
    for (const Row& r : rows) {
      std::printf("{");
      bool comma = false;
      for (const Field& f : r.fields()) {
        if (f.key[0] == '_') continue;
        std::printf("%s%s: %s", comma ? ", " : "", jsonString(f.key).c_str(),
                    f.number ? f.text.c_str() : jsonString(f.text).c_str());
        comma = true;
      }
      std::printf("}\n");
    }
    std::fflush(stdout);
    return;
  }
  std::vector<Column> cols = columns;
  if (cols.empty())
    for (const Field& f : rows[0].fields()) cols.push_back({f.key, f.key});
  std::vector<size_t> width(cols.size());
  std::vector<bool> right(cols.size(), false);
  for (size_t c = 0; c < cols.size(); ++c) {
    width[c] = cols[c].heading.size();
    for (const Row& r : rows)
      if (const Field* f = r.find(cols[c].key)) {
        width[c] = std::max(width[c], f->text.size());
        if (f->number) right[c] = true;
      }
  }
  auto line = [&](auto cell) {
    std::string s;
    for (size_t c = 0; c < cols.size(); ++c) {
      const std::string t = cell(c);
      const std::string pad(width[c] - std::min(width[c], t.size()), ' ');
      s += (c ? "  " : "") + (right[c] ? pad + t : t + pad);
    }
    while (!s.empty() && s.back() == ' ') s.pop_back();
    std::printf("%s\n", s.c_str());
  };
  line([&](size_t c) { return cols[c].heading; });
  line([&](size_t c) { return std::string(width[c], '-'); });
  for (const Row& r : rows)
    line([&](size_t c) {
      const Field* f = r.find(cols[c].key);
      return f ? f->text : std::string();
    });
  for (const std::string& n : notes) std::printf("%s\n", n.c_str());
  std::fflush(stdout);
}

int printFailures(const std::vector<std::string>& failures) {
  if (failures.empty()) return 0;
  std::fprintf(stderr, "\n########## bpbench: FAILED ##########\n");
  for (const std::string& f : failures) std::fprintf(stderr, "  %s\n", f.c_str());
  std::fprintf(stderr, "#####################################\n");
  return 1;
}

}  // namespace bpbench
