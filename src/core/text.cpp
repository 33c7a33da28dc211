#include "core/text.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace dlscale {

std::size_t utf8_sequence_length(std::string_view text, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[i + k]); };
  const unsigned char c = byte(0);
  if (c < 0x80) return 1;
  const std::size_t len = c >= 0xC2 && c <= 0xDF ? 2 : (c & 0xF0) == 0xE0 ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
  if (len == 0 || i + len > text.size()) return 0;
  for (std::size_t k = 1; k < len; ++k) {
    if ((byte(k) & 0xC0) != 0x80) return 0;
  }
  // The second byte's range rules out overlong forms, surrogates and > U+10FFFF.
  if (c == 0xE0 && byte(1) < 0xA0) return 0;
  if (c == 0xED && byte(1) > 0x9F) return 0;
  if (c == 0xF0 && byte(1) < 0x90) return 0;
  if (c == 0xF4 && byte(1) > 0x8F) return 0;
  return len;
}

bool is_utf8(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t len = utf8_sequence_length(text, i);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

bool has_control(std::string_view text) {
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7F) return true;
  }
  return false;
}

std::string join(const std::vector<std::string>& words, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) {
    if (i > 0) out += sep;
    out += words[i];
  }
  return out;
}

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t len = utf8_sequence_length(text, i);
    const auto c = static_cast<unsigned char>(text[i]);
    if (len > 1) {
      out.append(text.substr(i, len));
      i += len;
      continue;
    }
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else if (c == '\\') out += "\\\\";
    else if (len == 0 || c < 0x20 || c == 0x7F) out += fmt::format("\\x{:02x}", c);
    else out += static_cast<char>(c);
    ++i;
  }
  return out;
}

void check_text_value(std::string_view value, std::string_view what) {
  DLSCALE_CHECK(is_utf8(value) && !has_control(value),
                "{} must be UTF-8 text without control characters (got '{}')", what, printable(value));
}

std::string dump_json(const nlohmann::json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string dump_json(const nlohmann::ordered_json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace dlscale
