// Variable-length string attributes read from an HDF5 file's bytes (hdf5_raw.h). Every read is
// checked against the file's size and against the structure that contains it; nothing found in
// the file is used as an address, a size or an index before it is checked.
#include "data/hdf5_raw.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <set>
#include <vector>

namespace wavetrain::data::hdf5_raw {
namespace {

constexpr unsigned char kSignature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
constexpr uint64_t kUndefined = ~uint64_t{0};
// A header with more continuation blocks or messages than this is not one HDF5 wrote for a few
// attributes; the bound also stops a cycle of continuations.
constexpr int kMaxBlocks = 64;
constexpr int kMaxMessages = 1 << 16;

[[noreturn]] void bad(const std::string& what) { throw FormatError(what); }
std::string at_offset(uint64_t offset) { return " at byte " + std::to_string(offset); }

class File {
 public:
  explicit File(const std::string& path) : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
    struct stat st{};
    if (fd_ < 0 || ::fstat(fd_, &st) != 0) bad("cannot be opened for reading");
    size_ = static_cast<uint64_t>(st.st_size);
  }
  ~File() {
    if (fd_ >= 0) ::close(fd_);
  }
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  uint64_t size() const { return size_; }
  // `n` bytes at `offset`; `what` names the structure for the error.
  std::vector<unsigned char> read(uint64_t offset, uint64_t n, const char* what) const {
    if (offset > size_ || n > size_ - offset)
      bad(std::string(what) + " of " + std::to_string(n) + " bytes" + at_offset(offset) + " runs past the end of the file (" +
          std::to_string(size_) + " bytes)");
    std::vector<unsigned char> out(static_cast<size_t>(n));
    size_t done = 0;
    while (done < out.size()) {
      const ssize_t got = ::pread(fd_, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
      if (got <= 0) bad(std::string("cannot read ") + what + at_offset(offset));
      done += static_cast<size_t>(got);
    }
    return out;
  }

 private:
  int fd_;
  uint64_t size_ = 0;
};

// A bounds-checked little-endian reader over one structure's bytes.
class Cursor {
 public:
  Cursor(const unsigned char* data, size_t size, uint64_t file_offset, const char* what)
      : data_(data), size_(size), file_offset_(file_offset), what_(what) {}
  size_t position() const { return pos_; }
  size_t left() const { return size_ - pos_; }
  void skip(uint64_t n) {
    need(n);
    pos_ += static_cast<size_t>(n);
  }
  void seek(size_t p) {
    if (p > size_) bad(std::string(what_) + ": offset " + std::to_string(p) + " is outside it" + at_offset(file_offset_));
    pos_ = p;
  }
  uint64_t uint(unsigned bytes) {
    need(bytes);
    uint64_t v = 0;
    for (unsigned i = 0; i < bytes; ++i) v |= uint64_t{data_[pos_ + i]} << (8 * i);
    pos_ += bytes;
    return v;
  }
  const unsigned char* take(uint64_t n) {
    need(n);
    const unsigned char* p = data_ + pos_;
    pos_ += static_cast<size_t>(n);
    return p;
  }
  uint64_t file_offset() const { return file_offset_ + pos_; }

 private:
  void need(uint64_t n) const {
    if (n > size_ - pos_)
      bad(std::string(what_) + " is cut short: " + std::to_string(n) + " more bytes needed" + at_offset(file_offset_ + pos_) +
          ", " + std::to_string(size_ - pos_) + " left in it");
  }
  const unsigned char* data_;
  size_t size_, pos_ = 0;
  uint64_t file_offset_;
  const char* what_;
};

struct Superblock {
  uint64_t base = 0;  // addresses in the file are relative to this
  unsigned offset_size = 8, length_size = 8;
  uint64_t root = 0;  // the root group's object header
};

// The superblock is at 0 or at a power of two from 512 on (after a user block).
Superblock read_superblock(const File& f) {
  for (uint64_t at = 0; at + 16 <= f.size(); at = at == 0 ? 512 : at * 2) {
    const std::vector<unsigned char> head = f.read(at, std::min<uint64_t>(f.size() - at, 128), "superblock");
    if (std::memcmp(head.data(), kSignature, 8) != 0) continue;
    Cursor c(head.data(), head.size(), at, "superblock");
    c.skip(8);
    const unsigned version = static_cast<unsigned>(c.uint(1));
    Superblock s;
    if (version <= 1) {
      c.skip(4);  // free-space, root group symbol table and shared header versions, reserved
      s.offset_size = static_cast<unsigned>(c.uint(1));
      s.length_size = static_cast<unsigned>(c.uint(1));
      c.skip(1 + 2 + 2 + 4 + (version == 1 ? 4 : 0));
    } else if (version <= 3) {
      s.offset_size = static_cast<unsigned>(c.uint(1));
      s.length_size = static_cast<unsigned>(c.uint(1));
      c.skip(1);  // file consistency flags
    } else {
      bad("superblock version " + std::to_string(version) + at_offset(at) + " is not one this reader knows (0-3)");
    }
    for (unsigned size : {s.offset_size, s.length_size})
      if (size != 2 && size != 4 && size != 8) bad("superblock" + at_offset(at) + " gives an address or length size of " + std::to_string(size) + " bytes (2, 4 or 8)");
    s.base = c.uint(s.offset_size);
    if (s.base > f.size()) bad("superblock" + at_offset(at) + " gives a base address past the end of the file");
    // Versions 0 and 1: free-space, end-of-file and driver addresses, then the root group's symbol
    // table entry (its link name offset, then its object header). Versions 2 and 3: superblock
    // extension and end-of-file addresses, then the root group's object header.
    c.skip(s.offset_size * (version <= 1 ? 4 : 2));
    s.root = c.uint(s.offset_size);
    return s;
  }
  bad("no HDF5 superblock found");
}

struct Message {
  unsigned type = 0;
  std::vector<unsigned char> body;
  uint64_t file_offset = 0;
};

// Every message of an object header, following continuation blocks.
std::vector<Message> header_messages(const File& f, const Superblock& sb, uint64_t address) {
  std::vector<Message> out;
  struct Block {
    uint64_t offset, length;
  };
  std::vector<Block> pending;
  std::set<uint64_t> seen;
  auto absolute = [&](uint64_t a, const char* what) {
    if (a == kUndefined || a > f.size() - sb.base) bad(std::string(what) + " address " + std::to_string(a) + " is outside the file");
    return sb.base + a;
  };

  const uint64_t start = absolute(address, "object header");
  const std::vector<unsigned char> prefix = f.read(start, std::min<uint64_t>(f.size() - start, 64), "object header");
  const bool v2 = prefix.size() >= 4 && std::memcmp(prefix.data(), "OHDR", 4) == 0;
  bool creation_order = false;
  uint64_t messages_at = 0, messages_length = 0;
  Cursor p(prefix.data(), prefix.size(), start, "object header");
  if (v2) {
    p.skip(4);
    if (p.uint(1) != 2) bad("object header" + at_offset(start) + " has signature OHDR but not version 2");
    const unsigned flags = static_cast<unsigned>(p.uint(1));
    if (flags & 0x20) p.skip(16);  // access, modification, change and birth times
    if (flags & 0x10) p.skip(4);   // attribute storage phase change values
    messages_length = p.uint(1u << (flags & 3));
    creation_order = (flags & 0x04) != 0;
    messages_at = start + p.position();
  } else {
    if (p.uint(1) != 1) bad("object header" + at_offset(start) + " is neither version 1 nor version 2 (OHDR)");
    p.skip(1 + 2 + 4);  // reserved, message count, reference count
    messages_length = p.uint(4);
    messages_at = start + 16;  // the 12-byte prefix is padded to 8
  }
  pending.push_back({messages_at, messages_length});

  for (size_t b = 0; b < pending.size(); ++b) {
    if (static_cast<int>(b) >= kMaxBlocks) bad("object header" + at_offset(start) + " has more than " + std::to_string(kMaxBlocks) + " blocks");
    const Block block = pending[b];
    if (!seen.insert(block.offset).second) bad("object header" + at_offset(start) + " has a continuation cycle");
    std::vector<unsigned char> bytes = f.read(block.offset, block.length, "object header block");
    Cursor c(bytes.data(), bytes.size(), block.offset, "object header block");
    size_t end = bytes.size();
    if (v2) {
      if (b > 0) {  // continuation blocks: OCHK, messages, checksum
        if (bytes.size() < 8 || std::memcmp(bytes.data(), "OCHK", 4) != 0)
          bad("continuation block" + at_offset(block.offset) + " lacks its OCHK signature");
        c.skip(4);
      }
      end = b > 0 ? bytes.size() - 4 : bytes.size();  // chunk 0's length excludes its checksum
    }
    const size_t message_header = v2 ? (creation_order ? 6 : 4) : 8;
    while (end - c.position() >= message_header) {
      if (static_cast<int>(out.size()) >= kMaxMessages) bad("object header" + at_offset(start) + " has too many messages");
      Message m;
      uint64_t size = 0;
      if (v2) {
        m.type = static_cast<unsigned>(c.uint(1));
        size = c.uint(2);
        c.skip(1 + (creation_order ? 2 : 0));
      } else {
        m.type = static_cast<unsigned>(c.uint(2));
        size = c.uint(2);
        c.skip(4);
      }
      if (size > end - c.position()) bad("header message" + at_offset(c.file_offset()) + " claims " + std::to_string(size) + " bytes, more than its block holds");
      m.file_offset = c.file_offset();
      const unsigned char* body = c.take(size);
      m.body.assign(body, body + size);
      if (m.type == 0x10) {  // continuation: address and length of the next block
        Cursor k(m.body.data(), m.body.size(), m.file_offset, "continuation message");
        const uint64_t a = k.uint(sb.offset_size), length = k.uint(sb.length_size);
        pending.push_back({absolute(a, "continuation block"), length});
      }
      out.push_back(std::move(m));
    }
  }
  return out;
}

// A global heap collection's object `index`, checked against the collection's own bounds.
std::string heap_object(const File& f, const Superblock& sb, uint64_t collection, uint64_t index, uint64_t length) {
  if (collection == kUndefined || collection > f.size() - sb.base) bad("global heap address " + std::to_string(collection) + " is outside the file");
  const uint64_t at = sb.base + collection;
  const std::vector<unsigned char> head = f.read(at, 8 + sb.length_size, "global heap collection header");
  if (std::memcmp(head.data(), "GCOL", 4) != 0 || head[4] != 1) bad("no global heap collection (GCOL, version 1)" + at_offset(at));
  Cursor h(head.data(), head.size(), at, "global heap collection header");
  h.skip(8);
  const uint64_t collection_size = h.uint(sb.length_size);
  if (collection_size < head.size()) bad("global heap collection" + at_offset(at) + " claims a size of " + std::to_string(collection_size) + " bytes");
  const std::vector<unsigned char> bytes = f.read(at, collection_size, "global heap collection");
  Cursor c(bytes.data(), bytes.size(), at, "global heap collection");
  c.skip(head.size());
  const size_t object_header = 8 + sb.length_size;
  while (c.left() >= object_header) {
    const uint64_t id = c.uint(2);
    c.skip(2 + 4);  // reference count, reserved
    const uint64_t size = c.uint(sb.length_size);
    if (id == 0) break;  // free space: the rest of the collection
    if (size > c.left()) bad("global heap object " + std::to_string(id) + at_offset(c.file_offset()) + " claims " + std::to_string(size) + " bytes, more than its collection holds");
    const unsigned char* data = c.take(size);
    if (id == index) {
      if (length > size) bad("string of " + std::to_string(length) + " bytes is longer than its heap object (" + std::to_string(size) + " bytes)");
      return std::string(reinterpret_cast<const char*>(data), static_cast<size_t>(length));
    }
    c.skip(std::min<uint64_t>(c.left(), (8 - size % 8) % 8));  // objects are padded to 8 bytes
  }
  bad("global heap collection" + at_offset(at) + " has no object " + std::to_string(index));
}

}  // namespace

namespace {

// One attribute message's parts, each checked to lie inside the message.
struct AttributeMessage {
  std::string name;
  unsigned version = 0, flags = 0;
  size_t type_at = 0, space_at = 0, data_at = 0;
};

AttributeMessage parse_attribute(const Message& m, unsigned length_size) {
  Cursor c(m.body.data(), m.body.size(), m.file_offset, "attribute message");
  AttributeMessage a;
  a.version = static_cast<unsigned>(c.uint(1));
  if (a.version < 1 || a.version > 3) bad("attribute message" + at_offset(m.file_offset) + " has version " + std::to_string(a.version) + " (1-3)");
  a.flags = static_cast<unsigned>(c.uint(1));  // reserved in version 1
  const uint64_t name_size = c.uint(2), type_size = c.uint(2), space_size = c.uint(2);
  if (a.version == 3) c.skip(1);  // name encoding
  auto padded = [&](uint64_t n) { return a.version == 1 ? (n + 7) / 8 * 8 : n; };
  if (name_size == 0 || type_size < 8 || space_size < 4)
    bad("attribute message" + at_offset(m.file_offset) + " gives sizes " + std::to_string(name_size) + ", " + std::to_string(type_size) +
        " and " + std::to_string(space_size) + " for its name, type and dataspace");
  const unsigned char* name_bytes = c.take(padded(name_size));
  if (name_bytes[name_size - 1] != 0) bad("attribute message" + at_offset(m.file_offset) + ": its name is not terminated");
  a.name.assign(reinterpret_cast<const char*>(name_bytes), static_cast<size_t>(name_size - 1));
  a.type_at = c.position();
  c.skip(padded(type_size));
  a.space_at = c.position();
  c.skip(padded(space_size));
  a.data_at = c.position();
  // The value: elements x the datatype's size must lie inside the message (HDF5 1.10 copies that
  // many bytes without checking; fuzzing found it reading past a header's buffer).
  c.seek(a.type_at + 4);
  const uint64_t element_size = c.uint(4);
  c.seek(a.space_at);
  const unsigned space_version = static_cast<unsigned>(c.uint(1)), rank = static_cast<unsigned>(c.uint(1));
  c.skip(space_version == 1 ? 6 : 2);
  uint64_t elements = 1;
  for (unsigned d = 0; d < rank; ++d) {
    const uint64_t n = c.uint(length_size);
    elements = n != 0 && elements > (uint64_t{1} << 40) / n ? (uint64_t{1} << 40) : elements * n;
  }
  if (space_version == 2 && rank == 0 && m.body[a.space_at + 3] == 2) elements = 0;  // the null dataspace
  const uint64_t left = m.body.size() - a.data_at;
  if (element_size != 0 && elements > left / element_size)
    bad("attribute '" + a.name + "'" + at_offset(m.file_offset) + " claims " + std::to_string(elements) + " values of " +
        std::to_string(element_size) + " bytes, more than the " + std::to_string(left) + " bytes its message holds");
  return a;
}

}  // namespace

void check_root_attribute_messages(const std::string& path) {
  const File f(path);
  const Superblock sb = read_superblock(f);
  for (const Message& m : header_messages(f, sb, sb.root))
    if (m.type == 0x0C) (void)parse_attribute(m, sb.length_size);
}

std::optional<std::string> read_string_attribute(const std::string& path, uint64_t header_address, const std::string& name,
                                                 uint64_t max_bytes) {
  const File f(path);
  const Superblock sb = read_superblock(f);
  for (const Message& m : header_messages(f, sb, header_address)) {
    if (m.type != 0x0C) continue;  // attribute messages only
    const AttributeMessage a = parse_attribute(m, sb.length_size);
    if (a.name != name) continue;
    Cursor c(m.body.data(), m.body.size(), m.file_offset, "attribute message");
    const std::string where = "attribute '" + name + "'" + at_offset(m.file_offset);
    if (a.version > 1 && (a.flags & 3) != 0) bad(where + " uses a shared datatype or dataspace");

    // Datatype: variable-length (class 9) string (type bits 0-3 = 1).
    c.seek(a.type_at);
    const uint64_t class_version = c.uint(1), class_bits = c.uint(3);
    c.skip(4);  // element size in memory terms
    if ((class_version & 0x0F) != 9 || (class_bits & 0x0F) != 1) bad(where + " is not a variable-length string");

    // Dataspace: one element (scalar, or simple with every dimension 1).
    c.seek(a.space_at);
    const unsigned space_version = static_cast<unsigned>(c.uint(1)), rank = static_cast<unsigned>(c.uint(1));
    c.skip(space_version == 1 ? 6 : 2);  // flags + reserved, or flags + type
    uint64_t elements = 1;
    for (unsigned d = 0; d < rank; ++d) elements *= c.uint(sb.length_size) == 1 ? 1 : 0;
    if (space_version == 2 && rank == 0 && m.body[a.space_at + 3] == 2) elements = 0;  // the null dataspace
    if (elements != 1) bad(where + " is not a scalar");

    // Data: the string's length, then its global heap reference.
    c.seek(a.data_at);
    const uint64_t length = c.uint(4), collection = c.uint(sb.offset_size), index = c.uint(4);
    if (length > max_bytes) bad(where + " is " + std::to_string(length) + " bytes long; at most " + std::to_string(max_bytes) + " are read");
    if (length == 0) return std::string();
    return heap_object(f, sb, collection, index, length);
  }
  return std::nullopt;
}

}  // namespace wavetrain::data::hdf5_raw
