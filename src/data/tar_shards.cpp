#include "data/tar_shards.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include "core/error.h"
#include "data/byte_source.h"

namespace dlscale::data {

namespace {

constexpr size_t kBlock = 512;
constexpr size_t kMaxName = 100;
constexpr uint64_t kMaxOctalSize = (uint64_t{1} << 33) - 1;  // 11 octal digits
constexpr uint64_t kMaxExtensionHeader = uint64_t{1} << 20;  // GNU 'L' or pax data

// ustar header fields: offset and width.
struct Field {
  size_t at, width;
};
constexpr Field kName{0, 100}, kMode{100, 8}, kUid{108, 8}, kGid{116, 8}, kSize{124, 12},
    kMtime{136, 12}, kChecksum{148, 8}, kMagic{257, 6}, kVersion{263, 2}, kDevMajor{329, 8},
    kDevMinor{337, 8}, kPrefix{345, 155};
constexpr size_t kTypeFlag = 156;

uint64_t padded(uint64_t n) { return (n + kBlock - 1) / kBlock * kBlock; }

void put_field(std::string& header, Field f, std::string_view text) {
  std::copy(text.begin(), text.begin() + std::min(text.size(), f.width), header.begin() + f.at);
}

/// Sums a header's bytes with the checksum field counted as spaces, as
/// unsigned and (for old writers) signed chars.
std::pair<int64_t, int64_t> header_sums(std::string_view header) {
  int64_t u = 0, s = 0;
  for (size_t i = 0; i < kBlock; ++i) {
    const bool in_sum = i >= kChecksum.at && i < kChecksum.at + kChecksum.width;
    const char c = in_sum ? ' ' : header[i];
    u += static_cast<unsigned char>(c);
    s += static_cast<signed char>(c);
  }
  return {u, s};
}

/// A header's text field, up to its first NUL.
std::string field_text(std::string_view header, Field f) {
  const std::string_view v = header.substr(f.at, f.width);
  return std::string(v.substr(0, v.find('\0')));
}

/// A numeric field: octal text (up to a NUL, spaces around it allowed, empty
/// is 0) or GNU base-256 (first byte 0x80). nullopt when neither.
std::optional<uint64_t> field_number(std::string_view header, Field f) {
  const std::string_view v = header.substr(f.at, f.width);
  if (static_cast<unsigned char>(v[0]) == 0x80) {
    uint64_t n = 0;
    for (size_t i = 1; i < v.size(); ++i) {
      if (n >> 56) return std::nullopt;
      n = (n << 8) | static_cast<unsigned char>(v[i]);
    }
    return n;
  }
  std::string_view t = v.substr(0, v.find('\0'));
  while (!t.empty() && t.front() == ' ') t.remove_prefix(1);
  while (!t.empty() && t.back() == ' ') t.remove_suffix(1);
  uint64_t n = 0;
  for (const char c : t) {
    if (c < '0' || c > '7') return std::nullopt;
    n = n * 8 + static_cast<uint64_t>(c - '0');
  }
  return n;
}

/// What a pax extended header says about the next member.
struct PaxFields {
  std::optional<std::string> path;
  std::optional<uint64_t> size;
};

/// Parses pax records "LEN key=value\n"; nullopt when malformed.
std::optional<PaxFields> parse_pax(std::string_view data) {
  PaxFields out;
  while (!data.empty()) {
    size_t len = 0, i = 0;
    for (; i < data.size() && data[i] >= '0' && data[i] <= '9' && len <= data.size(); ++i) {
      len = len * 10 + static_cast<size_t>(data[i] - '0');
    }
    if (i == 0 || i >= data.size() || data[i] != ' ' || len <= i + 1 || len > data.size() ||
        data[len - 1] != '\n') {
      return std::nullopt;
    }
    const std::string_view record = data.substr(i + 1, len - i - 2);
    const size_t eq = record.find('=');
    if (eq == std::string_view::npos) return std::nullopt;
    const std::string_view key = record.substr(0, eq), value = record.substr(eq + 1);
    if (key == "path") out.path = std::string(value);
    if (key == "size") {
      uint64_t n = 0;
      if (value.empty() || value.size() > 19) return std::nullopt;
      for (const char c : value) {
        if (c < '0' || c > '9') return std::nullopt;
        n = n * 10 + static_cast<uint64_t>(c - '0');
      }
      out.size = n;
    }
    data.remove_prefix(len);
  }
  return out;
}

/// The name a header gives its member: ustar prefix + "/" + name.
std::string header_name(std::string_view header) {
  std::string name = field_text(header, kName);
  const bool posix = header.substr(kMagic.at, kMagic.width) == std::string_view("ustar\0", 6);
  const std::string prefix = posix ? field_text(header, kPrefix) : std::string();
  return prefix.empty() ? name : prefix + "/" + name;
}

}  // namespace

// --- writing -----------------------------------------------------------------

TarWriter::TarWriter(std::string path) : file_(std::move(path)) {}

uint64_t TarWriter::add(const std::string& name, std::string_view data) {
  DLSCALE_CHECK(!name.empty() && name.size() <= kMaxName,
                "tar member name '{}' is {} bytes; allowed: 1 to {}", name, name.size(), kMaxName);
  DLSCALE_CHECK(name.find('\0') == std::string::npos, "tar member name has a NUL byte");
  DLSCALE_CHECK(data.size() <= kMaxOctalSize,
                "tar member '{}' is {} bytes; the ustar limit is {} bytes", name, data.size(),
                kMaxOctalSize);
  std::string header(kBlock, '\0');
  put_field(header, kName, name);
  put_field(header, kMode, "0000644");
  put_field(header, kUid, "0000000");
  put_field(header, kGid, "0000000");
  put_field(header, kSize, fmt::format("{:011o}", data.size()));
  put_field(header, kMtime, "00000000000");
  header[kTypeFlag] = '0';
  put_field(header, kMagic, std::string_view("ustar\0", 6));
  put_field(header, kVersion, "00");
  put_field(header, kDevMajor, "0000000");
  put_field(header, kDevMinor, "0000000");
  // Six octal digits, NUL, space: the form tar itself writes.
  put_field(header, kChecksum,
            fmt::format("{:06o}", header_sums(header).first) + std::string("\0 ", 2));
  file_.write(header);
  const uint64_t offset = file_.size();
  file_.write(data);
  file_.write(std::string(padded(data.size()) - data.size(), '\0'));
  return offset;
}

void TarWriter::finish() {
  file_.write(std::string(2 * kBlock, '\0'));
  file_.commit();
}

// --- reading -----------------------------------------------------------------

namespace {

/// The header walk shared by the file and in-memory listers.
template <typename Source>
std::vector<TarMember> list_members(const Source& src, const std::string& file) {
  std::vector<TarMember> members;
  std::string scratch;
  std::optional<std::string> long_name;  // from a GNU 'L' or pax 'x' header
  constexpr uint64_t kNoSize = ~uint64_t{0};
  uint64_t long_size = kNoSize;  // from a pax 'x' header
  const uint64_t end = src.size();
  int64_t k = 0;
  for (uint64_t pos = 0; pos < end;) {
    const auto fail = [&](const std::string& what) {
      return Error(fmt::format("{}: tar member {} at byte {}: {}", file, k, pos, what));
    };
    if (end - pos < kBlock) {
      throw fail(fmt::format("truncated header ({} of 512 bytes)", end - pos));
    }
    const std::string header(src.read(pos, kBlock, scratch));
    if (header.find_first_not_of('\0') == std::string::npos) break;  // end-of-archive block
    const auto stored = field_number(header, kChecksum);
    if (!stored) throw fail("checksum field is not octal");
    const auto [usum, ssum] = header_sums(header);
    if (static_cast<int64_t>(*stored) != usum && static_cast<int64_t>(*stored) != ssum) {
      throw fail(fmt::format("header checksum mismatch (stored {}, computed {})", *stored, usum));
    }
    const auto header_size = field_number(header, kSize);
    if (!header_size) throw fail("size field is not octal");
    const char type = header[kTypeFlag];
    const bool extension = type == 'L' || type == 'K' || type == 'x' || type == 'g';
    const uint64_t size = extension || long_size == kNoSize ? *header_size : long_size;
    const uint64_t data_at = pos + kBlock;
    if (end - data_at < size) {
      throw fail(fmt::format("truncated: {} bytes of data declared, {} left in the file", size,
                             end - data_at));
    }
    if ((type == 'L' || type == 'x') && size > kMaxExtensionHeader) {
      throw fail(fmt::format("extended header of {} bytes exceeds the 1 MiB limit", size));
    }
    if (type == 'L') {
      const std::string_view data = src.read(data_at, size, scratch);
      long_name = std::string(data.substr(0, data.find('\0')));
    } else if (type == 'x') {
      const auto pax = parse_pax(src.read(data_at, size, scratch));
      if (!pax) throw fail("malformed pax extended header");
      if (pax->path) long_name = pax->path;
      if (pax->size) long_size = *pax->size;
    } else if (!extension) {
      std::string name = long_name ? *long_name : header_name(header);
      const bool regular =
          type == '0' || type == '7' || (type == '\0' && (name.empty() || name.back() != '/'));
      if (regular && name.empty()) throw fail("regular file with an empty name");
      if (regular) members.push_back(TarMember{std::move(name), data_at, size});
      long_name.reset();
      long_size = kNoSize;
      ++k;
    }
    pos = data_at + padded(size);
  }
  return members;
}

}  // namespace

std::vector<TarMember> list_tar(const std::string& path) {
  const FileBytes file(path);
  return list_members(file, path);
}

std::vector<TarMember> list_tar_bytes(std::string_view bytes, const std::string& name) {
  return list_members(MemoryBytes(bytes), name);
}

// --- WebDataset --------------------------------------------------------------

std::vector<WdsSample> group_wds(const std::vector<TarMember>& members) {
  std::vector<WdsSample> samples;
  for (const TarMember& m : members) {
    const size_t slash = m.name.rfind('/');
    const size_t base = slash == std::string::npos ? 0 : slash + 1;
    const size_t dot = m.name.find('.', base);
    if (dot == std::string::npos || dot == base) continue;  // no stem or no extension
    std::string key = m.name.substr(0, dot);
    std::string ext = m.name.substr(dot + 1);
    if (samples.empty() || samples.back().key != key) samples.push_back(WdsSample{key, {}});
    const bool fresh = samples.back().parts.emplace(ext, m).second;
    DLSCALE_CHECK(fresh, "tar member '{}' repeats extension '{}' of sample '{}'", m.name, ext, key);
  }
  return samples;
}

}  // namespace dlscale::data
