// ZipDirectory (zip_directory.h): reading the zip's end records and central directory with every
// offset and size bounds-checked, and deciding which records LibTorch's reader may be asked for.
#include "trainer/serialization/zip_directory.h"

#include <caffe2/serialize/inline_container.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "trainer/serialization/internal.h"
#include "trainer/serialization/pickle.h"

namespace wavetrain::serialization {

using detail::printable;

namespace {

uint64_t little_endian(const std::string& bytes, size_t at, int n) {
  uint64_t v = 0;
  for (int k = 0; k < n; ++k) v |= uint64_t{static_cast<unsigned char>(bytes[at + k])} << (8 * k);
  return v;
}

}  // namespace

ZipDirectory::ZipDirectory(const caffe2::serialize::ReadAdapterInterface& in) : in_(in), size_(in.size()) {
  // The end-of-central-directory record: 22 bytes, then a comment of up to 65535 bytes. Like
  // miniz, take the last signature in that range.
  if (size_ < 22) throw SerializationError("too short for a zip archive");
  const uint64_t tail_size = std::min<uint64_t>(size_, 22 + 65535);
  const std::string tail = read(size_ - tail_size, tail_size);
  size_t eocd = tail.size() - 22 + 1;
  while (eocd > 0 && tail.compare(eocd - 1, 4, "PK\x05\x06") != 0) --eocd;
  if (eocd == 0) throw SerializationError("no end of central directory (truncated?)");
  --eocd;
  uint64_t entries = little_endian(tail, eocd + 10, 2);
  uint64_t cd_size = little_endian(tail, eocd + 12, 4);
  uint64_t cd_offset = little_endian(tail, eocd + 16, 4);
  // Zip64 (LibTorch's writer always adds it): a locator just before that record points to a
  // record with 64-bit values, which then count, as in miniz.
  const uint64_t eocd_pos = size_ - tail_size + eocd;
  if (eocd_pos >= 20) {
    const std::string locator = read(eocd_pos - 20, 20);
    if (locator.compare(0, 4, "PK\x06\x07") == 0) {
      const uint64_t at = little_endian(locator, 8, 8);
      if (at > size_ || size_ - at < 56) throw SerializationError("zip64 locator points outside the file");
      const std::string z = read(at, 56);
      if (z.compare(0, 4, "PK\x06\x06") != 0) throw SerializationError("corrupt zip64 end of central directory");
      entries = little_endian(z, 32, 8);
      cd_size = little_endian(z, 40, 8);
      cd_offset = little_endian(z, 48, 8);
    }
  }
  if (cd_offset > size_ || cd_size > size_ - cd_offset) {
    throw SerializationError("central directory lies outside the file");
  }
  if (entries == 0) throw SerializationError("the archive holds no records");
  if (entries > cd_size / kCentralHeader) throw SerializationError("central directory is too short for its entries");
  const std::string cd = read(cd_offset, cd_size);

  size_t pos = 0;
  for (uint64_t i = 0; i < entries; ++i) {
    if (cd.size() - pos < kCentralHeader || cd.compare(pos, 4, "PK\x01\x02") != 0) {
      throw SerializationError("corrupt central directory entry " + std::to_string(i));
    }
    const uint64_t flags = little_endian(cd, pos + 8, 2);
    const uint64_t method = little_endian(cd, pos + 10, 2);
    uint64_t compressed = little_endian(cd, pos + 20, 4);
    uint64_t size = little_endian(cd, pos + 24, 4);
    const size_t name_size = little_endian(cd, pos + 28, 2);
    const size_t extra_size = little_endian(cd, pos + 30, 2);
    const size_t comment_size = little_endian(cd, pos + 32, 2);
    const uint64_t external_attributes = little_endian(cd, pos + 38, 4);
    uint64_t local = little_endian(cd, pos + 42, 4);
    if (cd.size() - pos - kCentralHeader < name_size + extra_size + comment_size) {
      throw SerializationError("corrupt central directory entry " + std::to_string(i));
    }
    const std::string name = cd.substr(pos + kCentralHeader, name_size);
    // Zip64 extra field (id 1): 64-bit values for the fields that hold 0xFFFFFFFF, in order.
    size_t x = pos + kCentralHeader + name_size;
    const size_t extra_end = x + extra_size;
    while (extra_end - x >= 4) {
      const uint64_t id = little_endian(cd, x, 2);
      const size_t len = little_endian(cd, x + 2, 2);
      if (len > extra_end - x - 4) {
        throw SerializationError("corrupt extra field of record '" + printable(name) + "'");
      }
      size_t field = x + 4;
      for (uint64_t* value : {&size, &compressed, &local}) {
        if (id != 1 || *value != 0xFFFFFFFF) continue;
        if (x + 4 + len - field < 8) {
          throw SerializationError("corrupt zip64 field of record '" + printable(name) + "'");
        }
        *value = little_endian(cd, field, 8);
        field += 8;
      }
      x += 4 + len;
    }
    pos += kCentralHeader + name_size + extra_size + comment_size;

    if (i == 0) {
      // LibTorch looks records up under the folder of the first one (the archive name).
      const size_t slash = name.find('/');
      if (slash == std::string::npos) throw SerializationError("the first record is not inside a folder");
      prefix_ = name.substr(0, slash + 1);
    }
    if (name.compare(0, prefix_.size(), prefix_) != 0) continue;  // invisible to LibTorch
    Record record = vet(name, flags, method, compressed, size, external_attributes, local);
    if (!records_.emplace(name.substr(prefix_.size()), std::move(record)).second) {
      throw SerializationError("record '" + printable(name) + "' appears twice");
    }
  }

  // What LibTorch's reader checks in its constructor, checked first so that it cannot throw.
  const Record* version = find("version");
  if (version == nullptr) throw SerializationError("no version record");
  if (!version->problem.empty()) throw SerializationError(version->problem);
  const std::string text = read(version->data_offset, std::min<uint64_t>(version->size, 32));
  uint64_t v = 0;
  size_t digits = 0;
  while (digits < text.size() && digits < 6 && text[digits] >= '0' && text[digits] <= '9') {
    v = v * 10 + static_cast<uint64_t>(text[digits++] - '0');
  }
  const bool newline_only = text.size() == digits || (text.size() == digits + 1 && text[digits] == '\n');
  if (digits == 0 || !newline_only || v < caffe2::serialize::kMinSupportedFileFormatVersion ||
      v > caffe2::serialize::kMaxSupportedFileFormatVersion) {
    throw SerializationError("unsupported version record '" + printable(text) + "'");
  }
}

ZipDirectory::Record ZipDirectory::vet(const std::string& name, uint64_t flags, uint64_t method, uint64_t compressed,
                                       uint64_t size, uint64_t external_attributes, uint64_t local) const {
  const std::string what = "record '" + printable(name) + "' ";
  Record r;
  r.size = size;
  if ((!name.empty() && name.back() == '/') || (external_attributes & 0x10) != 0) {
    r.problem = what + "is a directory";
  } else if ((flags & 0x61) != 0) {  // encrypted (bits 0, 6) or a patch (bit 5)
    r.problem = what + "is encrypted";
  } else if (method != 0 || compressed != size) {
    r.problem = what + "is compressed; torch.save stores records uncompressed";
  } else if (local > size_ || size_ - local < kLocalHeader) {
    r.problem = what + "lies outside the file";
  } else {
    const std::string header = read(local, kLocalHeader);
    r.data_offset = local + kLocalHeader + little_endian(header, 26, 2) + little_endian(header, 28, 2);
    if (header.compare(0, 4, "PK\x03\x04") != 0) {
      r.problem = what + "has a corrupt local header";
    } else if (r.data_offset > size_ || size > size_ - r.data_offset) {
      r.problem = what + "lies outside the file";
    }
  }
  return r;
}

std::string ZipDirectory::read(uint64_t pos, uint64_t n) const {
  std::string out(static_cast<size_t>(n), '\0');
  if (n > 0 && in_.read(pos, out.data(), out.size(), "") != out.size()) {
    throw SerializationError("read error at offset " + std::to_string(pos));
  }
  return out;
}

}  // namespace wavetrain::serialization
