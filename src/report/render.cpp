// Terminal, Markdown, CSV and JSON forms of a Report.
#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/text.h"
#include "core/text_table.h"
#include "report/report.h"

namespace dlscale::report {
namespace {

constexpr const char* kSchema = "dlscale.report/1";

std::string render_text(const Report& r) {
  std::ostringstream out;
  out << r.title << "\n";
  for (const Table& t : r.tables) {
    if (t.title != r.title) out << "\n" << t.title << "\n";
    out << (t.title != r.title ? "" : "\n");
    std::vector<Align> align;
    for (bool n : t.numeric) align.push_back(n ? Align::kRight : Align::kLeft);
    TextTable table(t.headers, align);
    for (const auto& row : t.rows) {
      std::vector<std::string> cells;
      for (const Cell& c : row) cells.push_back(c.text);
      table.add_row(cells);
    }
    table.print(out);
  }
  out << "\n";
  for (const std::string& n : r.notes) out << "note: " << n << "\n";
  return out.str();
}

std::string md_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '|') o += '\\';
    o += c;
  }
  return o;
}

std::string render_markdown(const Report& r) {
  std::ostringstream out;
  out << "## " << r.title << "\n";
  for (const Table& t : r.tables) {
    if (t.title != r.title) out << "\n### " << t.title << "\n";
    out << "\n|";
    for (const std::string& h : t.headers) out << " " << md_escape(h) << " |";
    out << "\n|";
    for (bool n : t.numeric) out << (n ? " ---: |" : " --- |");
    out << "\n";
    for (const auto& row : t.rows) {
      out << "|";
      for (const Cell& c : row) out << " " << md_escape(c.text) << " |";
      out << "\n";
    }
  }
  out << "\n";
  for (const std::string& n : r.notes) out << "_" << n << "_\n\n";
  return out.str();
}

std::string render_csv(const Report& r) {
  std::ostringstream out;
  const Table& t = r.data;
  for (std::size_t i = 0; i < t.headers.size(); ++i) out << (i ? "," : "") << csv_field(t.headers[i]);
  out << "\n";
  for (const auto& row : t.rows) {
    for (std::size_t i = 0; i < row.size(); ++i) out << (i ? "," : "") << csv_field(row[i].text);
    out << "\n";
  }
  return out.str();
}

/// Whole numbers as integers (counts, worker numbers), others as doubles.
nlohmann::ordered_json json_number(double v) {
  if (std::floor(v) == v && std::fabs(v) < 9e15) return static_cast<long long>(v);
  return v;
}

/// A label column: a number when the text is one (workers, batch), else text.
nlohmann::ordered_json json_label(const std::string& text) {
  if (text.empty() || text.find_first_not_of("0123456789.-") != std::string::npos) return text;
  try {
    std::size_t used = 0;
    const double v = std::stod(text, &used);
    if (used == text.size()) return json_number(v);
  } catch (const std::exception&) {
  }
  return text;
}

std::string render_json(const Report& r) {
  nlohmann::ordered_json j;
  j["schema"] = kSchema;
  j["type"] = r.type;
  j["title"] = r.title;
  j["notes"] = r.notes;
  j["columns"] = r.data.headers;
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const auto& row : r.data.rows) {
    nlohmann::ordered_json o;
    for (std::size_t i = 0; i < row.size(); ++i) {
      const Cell& c = row[i];
      o[r.data.headers[i]] = r.data.numeric[i] ? (c.value ? json_number(*c.value) : nlohmann::ordered_json(nullptr))
                                               : json_label(c.text);
    }
    rows.push_back(o);
  }
  j["rows"] = rows;
  return dump_json(j, 2) + "\n";
}

}  // namespace

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string o = "\"";
  for (char c : s) {
    if (c == '"') o += '"';
    o += c;
  }
  return o + "\"";
}

std::string render(const Report& report, Format format) {
  switch (format) {
    case Format::kText: return render_text(report);
    case Format::kMarkdown: return render_markdown(report);
    case Format::kCsv: return render_csv(report);
    case Format::kJson: return render_json(report);
  }
  return "";
}

}  // namespace dlscale::report
