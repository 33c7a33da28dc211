#pragma once
// Text that reaches terminals, scripts, logs and JSON: UTF-8 checks, a
// printable form of untrusted bytes, and JSON output that no byte can fail.
#include <cstddef>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace dlscale {

/// The length of the UTF-8 sequence that starts at text[i] (1 to 4), or 0
/// where no valid sequence starts there (a stray continuation byte, an
/// overlong form, a surrogate, a code point past U+10FFFF, or a cut-off end).
std::size_t utf8_sequence_length(std::string_view text, std::size_t i);

/// Whether 'text' is valid UTF-8.
bool is_utf8(std::string_view text);

/// Whether 'text' holds a C0 control character or DEL (tab included).
bool has_control(std::string_view text);

/// 'text' with every control character and every byte that is not valid
/// UTF-8 written as \n, \t, \r or \xNN, and '\' as '\\': safe on one line
/// of a message, a log or a shell comment.
std::string printable(std::string_view text);

/// `words` with `sep` between them ("" for none).
std::string join(const std::vector<std::string>& words, std::string_view sep);

/// Throws dlscale::Error unless 'value' is valid UTF-8 without control
/// characters: "WHAT must be UTF-8 text without control characters (got ...)".
void check_text_value(std::string_view value, std::string_view what);

/// j.dump(indent) with every invalid UTF-8 byte replaced by U+FFFD instead
/// of throwing: a result is never lost to a byte in a path or a host name.
std::string dump_json(const nlohmann::json& j, int indent = -1);
/// The same for a document that keeps its keys in insertion order.
std::string dump_json(const nlohmann::ordered_json& j, int indent = -1);

}  // namespace dlscale
