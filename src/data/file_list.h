#pragma once
// A list of file paths stored compactly (docs/data.md, "Image folders at
// scale"): each directory once, and each name in one shared buffer, so an
// image folder of a million files costs about its names' bytes plus 8 bytes
// a file, not a std::string (32 bytes and a heap block) a file. Torch-free.
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

namespace dlscale::data {

class FileList {
 public:
  FileList() = default;
  FileList(std::initializer_list<std::string> paths);

  /// Appends `path`. Paths added one directory after another share it
  /// (DIR/NAME: DIR is stored once while it repeats).
  void push_back(std::string_view path);
  /// Appends DIRECTORY/NAME where `directory` is an index from add_directory.
  void push_back(uint32_t directory, std::string_view name);
  /// Adds a directory that names can then be pushed into; returns its index.
  uint32_t add_directory(std::string directory);

  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  /// The i-th path (DIRECTORY/NAME).
  std::string operator[](size_t i) const;
  /// The index of the directory the i-th path is in.
  uint32_t directory_of(size_t i) const { return entries_[i].directory; }
  std::vector<std::string> paths() const;
  /// Bytes this list holds on the heap (for the tests of its compactness).
  size_t memory_bytes() const;

  class const_iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = std::string;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = std::string;
    const_iterator(const FileList* list, size_t i) : list_(list), i_(i) {}
    std::string operator*() const { return (*list_)[i_]; }
    const_iterator& operator++() {
      ++i_;
      return *this;
    }
    bool operator==(const const_iterator& o) const { return i_ == o.i_; }
    bool operator!=(const const_iterator& o) const { return i_ != o.i_; }

   private:
    const FileList* list_;
    size_t i_;
  };
  const_iterator begin() const { return {this, 0}; }
  const_iterator end() const { return {this, size()}; }

 private:
  struct Entry {
    uint32_t directory;
    uint32_t name;  ///< offset in names_; the name ends where the next begins
  };
  std::string name_at(size_t i) const;

  std::vector<std::string> directories_;
  std::string names_;
  std::vector<Entry> entries_;
};

}  // namespace dlscale::data
