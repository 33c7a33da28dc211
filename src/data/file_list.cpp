#include "data/file_list.h"

#include <limits>

#include "core/error.h"

namespace dlscale::data {

FileList::FileList(std::initializer_list<std::string> paths) {
  for (const auto& p : paths) push_back(p);
}

uint32_t FileList::add_directory(std::string directory) {
  DLSCALE_CHECK(directories_.size() < std::numeric_limits<uint32_t>::max(), "too many directories");
  directories_.push_back(std::move(directory));
  return static_cast<uint32_t>(directories_.size() - 1);
}

void FileList::push_back(uint32_t directory, std::string_view name) {
  DLSCALE_ASSERT(directory < directories_.size());
  DLSCALE_CHECK(names_.size() + name.size() <= std::numeric_limits<uint32_t>::max(),
                "more than 4 GiB of file names in one dataset");
  entries_.push_back({directory, static_cast<uint32_t>(names_.size())});
  names_ += name;
}

void FileList::push_back(std::string_view path) {
  const size_t slash = path.rfind('/');
  const std::string_view dir = slash == std::string_view::npos ? std::string_view() : path.substr(0, slash);
  const std::string_view name = slash == std::string_view::npos ? path : path.substr(slash + 1);
  // A path without '/' is kept apart from one in the root directory ("" vs "/").
  const std::string key = slash == std::string_view::npos ? std::string("\0", 1) : std::string(dir);
  if (directories_.empty() || directories_.back() != key) add_directory(key);
  push_back(static_cast<uint32_t>(directories_.size() - 1), name);
}

std::string FileList::name_at(size_t i) const {
  const size_t begin = entries_[i].name;
  const size_t end = i + 1 < entries_.size() ? entries_[i + 1].name : names_.size();
  return names_.substr(begin, end - begin);
}

std::string FileList::operator[](size_t i) const {
  DLSCALE_ASSERT(i < entries_.size());
  const std::string& dir = directories_[entries_[i].directory];
  if (dir.size() == 1 && dir[0] == '\0') return name_at(i);  // pushed without a directory
  return dir + "/" + name_at(i);
}

std::vector<std::string> FileList::paths() const {
  std::vector<std::string> out;
  out.reserve(size());
  for (size_t i = 0; i < size(); ++i) out.push_back((*this)[i]);
  return out;
}

size_t FileList::memory_bytes() const {
  size_t n = names_.capacity() + entries_.capacity() * sizeof(Entry) +
             directories_.capacity() * sizeof(std::string);
  for (const auto& d : directories_) n += d.capacity();
  return n;
}

}  // namespace dlscale::data
