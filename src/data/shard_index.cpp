#include "data/shard_index.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/files.h"
#include "data/byte_source.h"
#include "data/tar_shards.h"
#include "data/tfrecord.h"

namespace dlscale::data {
namespace {

constexpr std::string_view kMagic = "dlscale-shard-index 1 ";
constexpr uint64_t kMaxIndexBytes = uint64_t{1} << 30;
/// A TFRecord's framing around its payload: length, its CRC, the data's CRC.
constexpr uint64_t kFraming = kTfrecordHeaderBytes + kTfrecordFooterBytes;

struct ShardStat {
  uint64_t bytes = 0;
  int64_t mtime_ns = 0;
};

ShardStat stat_shard(const std::string& shard) {
  struct stat st {};
  DLSCALE_CHECK(::stat(shard.c_str(), &st) == 0, "cannot read '{}': {}", shard, std::strerror(errno));
  return {static_cast<uint64_t>(st.st_size),
          static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + static_cast<int64_t>(st.st_mtim.tv_nsec)};
}

std::string escape_key(const std::string& key) {
  std::string out;
  for (const unsigned char c : key) {
    if (c == '%' || c < 0x20 || c == 0x7f) {
      out += fmt::format("%{:02X}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string unescape_key(std::string_view text, const std::string& where) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    DLSCALE_CHECK(c >= 0x20 && c != 0x7f, "{}: a raw control byte in a key", where);
    if (c != '%') {
      out += text[i];
      continue;
    }
    unsigned value = 0;
    const auto [end, ec] = std::from_chars(text.data() + i + 1, text.data() + std::min(text.size(), i + 3), value, 16);
    const bool upper = end == text.data() + i + 3 && !std::islower(static_cast<unsigned char>(text[i + 1])) &&
                       !std::islower(static_cast<unsigned char>(text[i + 2]));
    // Only what escape_key escapes, as it writes it: one spelling per key.
    DLSCALE_CHECK(ec == std::errc() && upper && (value == '%' || value < 0x20 || value == 0x7f),
                  "{}: a bad %-escape in a key", where);
    out += static_cast<char>(value);
    i += 2;
  }
  return out;
}

/// Splits the next space-separated field off `line` (which keeps the rest).
std::string_view next_field(std::string_view& line) {
  const size_t space = line.find(' ');
  const std::string_view field = line.substr(0, space);
  line = space == std::string_view::npos ? std::string_view() : line.substr(space + 1);
  return field;
}

template <typename T>
T number(std::string_view& line, const std::string& where, const char* what) {
  const std::string_view field = next_field(line);
  T value{};
  const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), value);
  // Decimal as serialize_index writes it: no leading zero, no "-0".
  const std::string_view digits = field.substr(!field.empty() && field[0] == '-' ? 1 : 0);
  const bool canonical = !digits.empty() && (digits[0] != '0' || field == "0");
  DLSCALE_CHECK(ec == std::errc() && end == field.data() + field.size() && canonical,
                "{}: '{}' is not a valid {}", where, std::string(field.substr(0, 30)), what);
  return value;
}

/// Reads `keyword` then a number.
template <typename T>
T keyed(std::string_view& line, const char* keyword, const std::string& where) {
  DLSCALE_CHECK(next_field(line) == keyword, "{}: the header lacks '{}'", where, keyword);
  return number<T>(line, where, keyword);
}

/// Takes the next line off `text` (without its newline); throws at the end.
std::string_view take_line(std::string_view& text, const std::string& where) {
  const size_t nl = text.find('\n');
  DLSCALE_CHECK(nl != std::string_view::npos, "{}: truncated (a line without its newline)", where);
  const std::string_view line = text.substr(0, nl);
  text.remove_prefix(nl + 1);
  return line;
}

/// The smallest and largest label of `entries`; {0, -1} when there are none.
std::pair<int64_t, int64_t> label_range(const std::vector<IndexEntry>& entries) {
  int64_t lo = 0, hi = -1;
  for (const auto& e : entries) {
    lo = hi < 0 ? e.label : std::min(lo, e.label);
    hi = std::max(hi, e.label);
  }
  return {lo, hi};
}

/// The entries must lie in the shard in order, and TFRecord's must tile it.
void check_entries(const ShardIndex& index, const std::string& name) {
  const bool tfrecord = index.format == "tfrecord";
  uint64_t end = 0;
  for (size_t k = 0; k < index.entries.size(); ++k) {
    const IndexEntry& e = index.entries[k];
    const std::string where = fmt::format("{}: sample {}", name, k);
    DLSCALE_CHECK(e.offset >= end && e.size <= index.shard_bytes && e.offset <= index.shard_bytes - e.size,
                  "{}: bytes {}..{} overlap the previous sample or lie outside the shard's {} bytes", where,
                  e.offset, e.offset + e.size, index.shard_bytes);
    DLSCALE_CHECK(!tfrecord || (e.offset == end && e.size >= kFraming),
                  "{}: TFRecord samples must follow each other from byte 0", where);
    DLSCALE_CHECK(e.label >= 0, "{}: negative label {}", where, e.label);
    end = e.offset + e.size;
  }
  DLSCALE_CHECK(!tfrecord || end == index.shard_bytes, "{}: the records end at byte {} of {}", name, end,
                index.shard_bytes);
}

/// Parses a WebDataset .cls member: a decimal label, optional whitespace.
int64_t parse_class(const std::string& text, const std::string& where) {
  const char* b = text.data();
  const char* e = b + text.size();
  while (b < e && std::isspace(static_cast<unsigned char>(*b))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(e[-1]))) --e;
  int64_t v = -1;
  const auto [end, ec] = std::from_chars(b, e, v);
  DLSCALE_CHECK(ec == std::errc() && end == e && b != e && v >= 0,
                "{}: the .cls member '{}' is not a non-negative integer label", where, text.substr(0, 40));
  return v;
}

std::vector<IndexEntry> scan_tfrecord(const std::string& file) {
  const FileBytes reader(file);
  const std::vector<RecordSpan> spans = index_tfrecord(file, /*verify_data=*/false);
  std::vector<IndexEntry> entries;
  for (size_t k = 0; k < spans.size(); ++k) {
    const std::string payload = read_at(reader, spans[k].offset, spans[k].length);
    ExampleFields ex;
    try {
      ex = decode_example(payload);
    } catch (const Error& e) {
      throw Error(fmt::format("{}: record {}: {}", file, k, e.what()));
    }
    DLSCALE_CHECK(ex.has_image && ex.has_label, "{}: record {}: no image/encoded or image/class/label feature",
                  file, k);
    entries.push_back({spans[k].offset - kTfrecordHeaderBytes, spans[k].length + kFraming, ex.label, ""});
  }
  return entries;
}

std::vector<IndexEntry> scan_wds(const std::string& file) {
  const FileBytes reader(file);
  std::vector<WdsSample> samples;
  try {
    samples = group_wds(list_tar(file));
  } catch (const Error& e) {
    const std::string what = e.what();
    throw Error(what.rfind(file, 0) == 0 ? what : file + ": " + what);
  }
  std::vector<IndexEntry> entries;
  for (const auto& s : samples) {
    const std::string where = fmt::format("{} sample {}", file, s.key);
    const TarMember* image = nullptr;
    for (const char* ext : {"jpg", "jpeg", "png"}) {
      const auto it = s.parts.find(ext);
      if (it != s.parts.end()) image = &it->second;
    }
    const auto cls = s.parts.find("cls");
    DLSCALE_CHECK(image != nullptr, "{}: no .jpg, .jpeg or .png member", where);
    DLSCALE_CHECK(cls != s.parts.end(), "{}: no .cls member (the label)", where);
    DLSCALE_CHECK(cls->second.size <= 64, "{}: the .cls member is {} bytes, not a label", where, cls->second.size);
    const int64_t label = parse_class(read_at(reader, cls->second.offset, cls->second.size), where);
    entries.push_back({image->offset, image->size, label, s.key});
  }
  return entries;
}

}  // namespace

ShardIndex scan_shard(const std::string& shard, const std::string& format) {
  ShardIndex index;
  index.format = format;
  const ShardStat before = stat_shard(shard);
  index.shard_bytes = before.bytes;
  index.shard_mtime_ns = before.mtime_ns;
  index.entries = format == "wds" ? scan_wds(shard) : scan_tfrecord(shard);
  return index;
}

std::string index_path(const std::string& shard) { return shard + kIndexSuffix; }

std::string serialize_index(const ShardIndex& index) {
  const auto [lo, hi] = label_range(index.entries);
  std::string out = fmt::format("{}{}\nshard-bytes {} mtime-ns {} samples {} labels {} {}\n", kMagic,
                                index.format, index.shard_bytes, index.shard_mtime_ns, index.entries.size(),
                                lo, hi);
  for (const auto& e : index.entries) {
    out += fmt::format("{} {} {}", e.offset, e.size, e.label);
    if (index.format == "wds") out += " " + escape_key(e.key);
    out += '\n';
  }
  const uint32_t crc = crc32c(reinterpret_cast<const uint8_t*>(out.data()), out.size());
  return out + fmt::format("crc32c {:08x}\n", crc);
}

ShardIndex parse_index(std::string_view text, const std::string& name) {
  const size_t crc_at = text.rfind("crc32c ");
  DLSCALE_CHECK(crc_at != std::string_view::npos && (crc_at == 0 || text[crc_at - 1] == '\n'),
                "{}: no checksum line (truncated?)", name);
  std::string_view crc_line = text.substr(crc_at + 7);
  DLSCALE_CHECK(crc_line.size() == 9 && crc_line.back() == '\n', "{}: a malformed checksum line", name);
  uint32_t stored = 0;
  const auto [end, ec] = std::from_chars(crc_line.data(), crc_line.data() + 8, stored, 16);
  DLSCALE_CHECK(ec == std::errc() && end == crc_line.data() + 8, "{}: a malformed checksum line", name);
  std::string_view body = text.substr(0, crc_at);
  const uint32_t crc = crc32c(reinterpret_cast<const uint8_t*>(body.data()), body.size());
  DLSCALE_CHECK(crc == stored, "{}: checksum mismatch (stored {:08x}, computed {:08x})", name, stored, crc);

  ShardIndex index;
  std::string_view line = take_line(body, name);
  DLSCALE_CHECK(line.substr(0, kMagic.size()) == kMagic, "{}: not a dlscale shard index (version 1)", name);
  index.format = std::string(line.substr(kMagic.size()));
  DLSCALE_CHECK(index.format == "tfrecord" || index.format == "wds", "{}: unknown format '{}'", name,
                index.format.substr(0, 20));
  line = take_line(body, name);
  index.shard_bytes = keyed<uint64_t>(line, "shard-bytes", name);
  index.shard_mtime_ns = keyed<int64_t>(line, "mtime-ns", name);
  const auto samples = keyed<uint64_t>(line, "samples", name);
  const auto lowest = keyed<int64_t>(line, "labels", name);
  const auto highest = number<int64_t>(line, name, "label");
  DLSCALE_CHECK(line.empty(), "{}: extra fields in the header", name);
  DLSCALE_CHECK(samples <= body.size() / 6 + 1, "{}: {} samples cannot fit in its {} bytes", name, samples,
                body.size());
  index.entries.reserve(samples);
  for (uint64_t k = 0; k < samples; ++k) {
    std::string_view fields = take_line(body, name);
    const std::string where = fmt::format("{}: sample {}", name, k);
    IndexEntry e;
    e.offset = number<uint64_t>(fields, where, "offset");
    e.size = number<uint64_t>(fields, where, "size");
    if (index.format == "wds") {
      e.label = number<int64_t>(fields, where, "label");
      e.key = unescape_key(fields, where);
      DLSCALE_CHECK(!e.key.empty(), "{}: no key", where);
    } else {
      e.label = number<int64_t>(fields, where, "label");
      DLSCALE_CHECK(fields.empty(), "{}: extra fields", where);
    }
    index.entries.push_back(std::move(e));
  }
  DLSCALE_CHECK(body.empty(), "{}: more lines than its {} samples", name, samples);
  check_entries(index, name);
  const auto [lo, hi] = label_range(index.entries);
  DLSCALE_CHECK(lo == lowest && hi == highest, "{}: the header's labels {}..{} are not the samples' {}..{}", name,
                lowest, highest, lo, hi);
  return index;
}

namespace {

/// The sidecar's text, read once into a string of its size, after its first
/// bytes proved it an index and its size one its shard can justify: a line
/// is at most 4 times the bytes its sample takes in the shard (TFRecord: 63
/// bytes for 16 of framing; WebDataset: a key escaped 3 to 1 against its tar
/// headers). Junk of any size costs no more memory than that bound.
std::string read_sidecar(const std::string& path, uint64_t shard_bytes) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  DLSCALE_CHECK(in.good(), "cannot read '{}': {}", path, std::strerror(errno));
  const auto bytes = static_cast<uint64_t>(in.tellg());
  const uint64_t most = std::min(kMaxIndexBytes, 4 * shard_bytes + 4096);
  DLSCALE_CHECK(bytes <= most, "{}: {} bytes, more than an index of its {}-byte shard can hold ({})", path, bytes,
                shard_bytes, most);
  std::string text(std::min<uint64_t>(bytes, kMagic.size()), '\0');
  in.seekg(0);
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  DLSCALE_CHECK(in.good() && text == kMagic, "{}: not a dlscale shard index (version 1)", path);
  text.resize(bytes);
  in.read(text.data() + kMagic.size(), static_cast<std::streamsize>(bytes - kMagic.size()));
  DLSCALE_CHECK(static_cast<uint64_t>(in.gcount()) == bytes - kMagic.size(), "cannot read '{}': it shrank", path);
  return text;
}

}  // namespace

std::optional<ShardIndex> load_index(const std::string& shard, const std::string& format, std::string& why) {
  const std::string path = index_path(shard);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    why = "no index";
    return std::nullopt;
  }
  try {
    DLSCALE_CHECK(std::filesystem::is_regular_file(path, ec), "{}: not a regular file", path);
    const ShardStat now = stat_shard(shard);
    ShardIndex index = parse_index(read_sidecar(path, now.bytes), path);
    DLSCALE_CHECK(index.format == format, "{}: indexes a {} shard, not {}", path, index.format, format);
    if (now.bytes != index.shard_bytes || now.mtime_ns != index.shard_mtime_ns) {
      why = fmt::format("stale: {} describes {} bytes modified at {} ns, the shard has {} bytes modified at {} ns",
                        path, index.shard_bytes, index.shard_mtime_ns, now.bytes, now.mtime_ns);
      return std::nullopt;
    }
    return index;
  } catch (const Error& e) {
    why = std::string("corrupt: ") + e.what();
    return std::nullopt;
  }
}

ShardIndex stamped_index(const std::string& shard, const std::string& format, std::vector<IndexEntry> entries) {
  const ShardStat now = stat_shard(shard);
  return {format, now.bytes, now.mtime_ns, std::move(entries)};
}

void write_index(const std::string& shard, const ShardIndex& index) {
  const ShardStat now = stat_shard(shard);
  DLSCALE_CHECK(now.bytes == index.shard_bytes && now.mtime_ns == index.shard_mtime_ns,
                "{} changed while it was being indexed; run again", shard);
  check_entries(index, shard);
  write_file_atomic(index_path(shard), serialize_index(index));
}

std::vector<IndexEntry> shard_entries(const std::string& shard, const std::string& format, std::string& scanned) {
  std::string why;
  if (std::optional<ShardIndex> index = load_index(shard, format, why)) return std::move(index->entries);
  scanned = why;
  return scan_shard(shard, format).entries;
}

}  // namespace dlscale::data
