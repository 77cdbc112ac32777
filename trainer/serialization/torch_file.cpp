// The torch.save zip container around pickle.h, files in and out, and state dicts; see
// torch_file.h.
//
// LibTorch 1.13's zip container shapes this file:
//  - PyTorchStreamWriter's destructor finalizes the archive, and after a write error it throws
//    again from there, which terminates the process (PyTorch issue 87997). So the writer always
//    gets a callback that cannot fail; the callback remembers the first write error, and we check
//    it once the archive is complete.
//  - PyTorchStreamReader trusts the zip's central directory (sizes, flags) and leaks when its
//    constructor throws; ZipDirectory below vets the archive before the reader sees it (the
//    findings are in docs/fuzzing.md).
//  - It reports a malformed archive by throwing c10::Error (and, for a bad version record,
//    std::invalid_argument); everything is turned into SerializationError here.
#include "trainer/serialization/torch_file.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <new>
#include <set>

namespace wavetrain::serialization {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "storages are written as raw native bytes, which torch.save's format defines as little-endian");

// What every torch.save archive's first record starts with: a zip local file header.
constexpr char kZipMagic[] = "PK\x03\x04";
// What files from torch.save before 1.6 (_use_new_zipfile_serialization=False) start with: the
// pickled magic number 0x1950a86a20f9469cfc6c.
constexpr char kLegacyMagic[] = "\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19";

// c10::Error messages start with "[enforce fail at file.cc:123] . "; users need only the rest.
std::string libtorch_message(const c10::Error& e) {
  std::string m = e.what_without_backtrace();
  if (m.rfind("[enforce fail at", 0) == 0) {
    const size_t end = m.find("] ");
    if (end != std::string::npos) m = m.substr(end + 2);
    if (m.rfind(". ", 0) == 0) m = m.substr(2);
  }
  const size_t newline = m.find('\n');
  if (newline != std::string::npos) m.resize(newline);
  return m;
}

// Archive bytes from memory. Reads past the end come back short, which miniz reports as an error
// (LibTorch's own MemoryReadAdapter would copy past the end).
class BytesReadAdapter final : public caffe2::serialize::ReadAdapterInterface {
 public:
  explicit BytesReadAdapter(const std::string& bytes) : bytes_(bytes) {}
  size_t size() const override { return bytes_.size(); }
  size_t read(uint64_t pos, void* buf, size_t n, const char* /*what*/) const override {
    if (pos >= bytes_.size()) return 0;
    n = std::min<uint64_t>(n, bytes_.size() - pos);
    std::memcpy(buf, bytes_.data() + pos, n);
    return n;
  }

 private:
  const std::string& bytes_;
};

// Archive bytes from an open file, read with pread. It never throws (miniz, which calls it, is C
// code); a failed read comes back short and its errno is kept for the message.
class FileReadAdapter final : public caffe2::serialize::ReadAdapterInterface {
 public:
  FileReadAdapter(int fd, size_t size) : fd_(fd), size_(size) {}
  ~FileReadAdapter() override { ::close(fd_); }
  size_t size() const override { return size_; }
  size_t read(uint64_t pos, void* buf, size_t n, const char* /*what*/) const override {
    if (pos >= size_) return 0;
    n = std::min<uint64_t>(n, size_ - pos);
    size_t done = 0;
    while (done < n) {
      const ssize_t got = ::pread(fd_, static_cast<char*>(buf) + done, n - done, static_cast<off_t>(pos + done));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) error_ = errno;
      if (got <= 0) break;
      done += static_cast<size_t>(got);
    }
    return done;
  }
  int error() const { return error_; }

 private:
  int fd_;
  size_t size_;
  mutable int error_ = 0;
};

// Keeps names from the archive printable and short in messages.
std::string printable(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < 120; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7F) {
      out.push_back(static_cast<char>(c));
    } else {
      static const char hex[] = "0123456789abcdef";
      out += "\\x";
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 15]);
    }
  }
  return s.size() > 120 ? out + "..." : out;
}

uint64_t little_endian(const std::string& bytes, size_t at, int n) {
  uint64_t v = 0;
  for (int k = 0; k < n; ++k) v |= uint64_t{static_cast<unsigned char>(bytes[at + k])} << (8 * k);
  return v;
}

// A read-only look at the zip's central directory, taken before LibTorch's reader sees the file,
// because that reader (miniz) trusts it: it allocates whatever size a record claims (a 2 KB file
// can ask for terabytes); it "extracts" a record flagged as a directory, or a corrupt compressed
// one, by returning a buffer it never wrote; and it leaks its state when its constructor throws
// (e.g. for a missing or bad "version" record). Readable records are what torch.save writes:
// uncompressed, unencrypted files inside the file. Other records may exist (a re-zipped archive
// has directory entries) but cannot be read. Names must be unique. Errors are SerializationErrors
// without the file name.
class ZipDirectory {
 public:
  struct Record {
    uint64_t data_offset = 0;
    uint64_t size = 0;
    std::string problem;  // why the record cannot be read; empty when it can
  };

  explicit ZipDirectory(const caffe2::serialize::ReadAdapterInterface& in) : in_(in), size_(in.size()) {
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

  // A record by its name inside the archive folder ("data.pkl"); nullptr when absent.
  const Record* find(const std::string& name) const {
    const auto it = records_.find(name);
    return it == records_.end() ? nullptr : &it->second;
  }

  const std::string& prefix() const { return prefix_; }
  const std::map<std::string, Record>& records() const { return records_; }

 private:
  static constexpr size_t kCentralHeader = 46;
  static constexpr size_t kLocalHeader = 30;

  // Where a record's bytes are, or why miniz would not hand them over intact.
  Record vet(const std::string& name, uint64_t flags, uint64_t method, uint64_t compressed, uint64_t size,
             uint64_t external_attributes, uint64_t local) const {
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

  // Exactly n bytes at pos (the caller checked they are inside the file).
  std::string read(uint64_t pos, uint64_t n) const {
    std::string out(static_cast<size_t>(n), '\0');
    if (n > 0 && in_.read(pos, out.data(), out.size(), "") != out.size()) {
      throw SerializationError("read error at offset " + std::to_string(pos));
    }
    return out;
  }

  const caffe2::serialize::ReadAdapterInterface& in_;
  uint64_t size_;
  std::string prefix_;  // "archive/"
  std::map<std::string, Record> records_;
};

// A record's bytes through LibTorch's reader, after checking that it finds the record we vetted
// (miniz matches names case-insensitively, so a look-alike name could otherwise slip in).
void check_readable(const ZipDirectory::Record& vetted) {
  if (!vetted.problem.empty()) throw SerializationError("not a PyTorch file (zip archive): " + vetted.problem);
}

at::DataPtr read_record(caffe2::serialize::PyTorchStreamReader& reader, const ZipDirectory::Record& vetted,
                        const std::string& name) {
  check_readable(vetted);
  if (reader.getRecordOffset(name) != vetted.data_offset) {
    throw SerializationError("not a PyTorch file (zip archive): records named like '" + printable(name) +
                             "' are ambiguous");
  }
  auto [data, size] = reader.getRecord(name);
  if (size != vetted.size) {
    throw SerializationError("not a PyTorch file (zip archive): record '" + printable(name) + "' changed size");
  }
  return std::move(data);
}

// Turns one storage record into a 1-D tensor that keeps the record's memory alive.
at::Tensor load_storage(caffe2::serialize::PyTorchStreamReader& reader, const ZipDirectory& dir,
                        const std::string& key, at::ScalarType dtype, int64_t numel) {
  const std::string record = "data/" + key;
  const ZipDirectory::Record* vetted = dir.find(record);
  if (vetted == nullptr) {
    throw SerializationError("storage '" + printable(key) + "' is missing (no record " + printable(record) +
                             " in the archive)");
  }
  check_readable(*vetted);
  int64_t needed = 0;
  if (__builtin_mul_overflow(numel, static_cast<int64_t>(c10::elementSize(dtype)), &needed)) {
    throw SerializationError("storage '" + printable(key) + "' claims " + std::to_string(numel) +
                             " elements, more than any file holds");
  }
  // Checked before reading, so a false size costs nothing.
  if (vetted->size < static_cast<uint64_t>(needed)) {
    throw SerializationError("storage '" + printable(key) + "' holds " + std::to_string(vetted->size) +
                             " bytes, the tensor needs " + std::to_string(needed));
  }
  const auto options = at::TensorOptions().dtype(dtype);
  if (numel == 0) return at::empty({0}, options);
  // The record's buffer (from getRecord's allocation) becomes the storage; the tensor's deleter
  // owns it, so tensors stay valid after the reader is gone, and views share one copy.
  auto holder = std::make_shared<at::DataPtr>(read_record(reader, *vetted, record));
  return at::from_blob(holder->get(), {numel}, [holder](void*) {}, options);
}

// An archive opened for reading: our vetted directory and LibTorch's reader over the same bytes.
struct OpenArchive {
  std::unique_ptr<ZipDirectory> dir;
  std::unique_ptr<caffe2::serialize::PyTorchStreamReader> reader;
  std::string read_error;  // " (read error: ...)" when the file could not be read, else empty
};

// Errors start with `name`.
OpenArchive open_archive(const std::shared_ptr<caffe2::serialize::ReadAdapterInterface>& in, const std::string& name,
                         const FileReadAdapter* file) {
  auto read_error = [&]() -> std::string {
    return file && file->error() ? std::string(" (read error: ") + std::strerror(file->error()) + ")" : std::string();
  };
  const std::string not_torch = name + ": not a PyTorch file (zip archive): ";

  // Recognize the common wrong inputs before the zip checks give a less helpful message.
  char head[sizeof kLegacyMagic - 1] = {};
  const size_t got = in->read(0, head, sizeof head, "");
  if (in->size() == 0) throw SerializationError(not_torch + "the file is empty");
  if (got == sizeof head && std::memcmp(head, kLegacyMagic, sizeof head) == 0) {
    throw SerializationError(name + ": written in torch.save's legacy format (before PyTorch 1.6), which is not "
                             "supported; load it in Python and save it again");
  }
  if (got < 4 || std::memcmp(head, kZipMagic, 4) != 0) {
    if (file && file->error()) throw SerializationError(name + ": cannot read" + read_error());
    throw SerializationError(not_torch + "it does not start with a zip header");
  }

  std::unique_ptr<ZipDirectory> dir;
  try {
    dir = std::make_unique<ZipDirectory>(*in);
  } catch (const SerializationError& e) {
    throw SerializationError(not_torch + e.what() + read_error());
  }
  std::unique_ptr<caffe2::serialize::PyTorchStreamReader> reader;
  try {
    reader = std::make_unique<caffe2::serialize::PyTorchStreamReader>(in);
  } catch (const c10::Error& e) {
    throw SerializationError(not_torch + libtorch_message(e) + read_error());
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {
    throw SerializationError(not_torch + e.what() + read_error());
  }
  return OpenArchive{std::move(dir), std::move(reader), read_error()};
}

Value read_archive(const std::shared_ptr<caffe2::serialize::ReadAdapterInterface>& in, const std::string& name,
                   const FileReadAdapter* file) {
  const OpenArchive archive = open_archive(in, name, file);
  const ZipDirectory& dir = *archive.dir;
  caffe2::serialize::PyTorchStreamReader& reader = *archive.reader;
  const ZipDirectory::Record* pkl_record = dir.find("data.pkl");
  if (pkl_record == nullptr) {
    if (dir.find("constants.pkl") != nullptr) {
      throw SerializationError(name + ": a TorchScript archive (torch.jit.save), not a torch.save file");
    }
    throw SerializationError(name + ": not a torch.save file: the archive has no data.pkl");
  }
  try {
    if (const ZipDirectory::Record* order = dir.find("byteorder")) {
      const at::DataPtr data = read_record(reader, *order, "byteorder");
      const std::string text(static_cast<const char*>(data.get()), order->size);
      if (text != "little") {
        throw SerializationError("storages are stored with byte order '" + printable(text) +
                                 "'; only little-endian files are supported");
      }
    }
    const at::DataPtr pkl_data = read_record(reader, *pkl_record, "data.pkl");
    const std::string pkl(static_cast<const char*>(pkl_data.get()), pkl_record->size);
    return unpickle(pkl, [&](const std::string& key, at::ScalarType dtype, int64_t numel) {
      return load_storage(reader, dir, key, dtype, numel);
    });
  } catch (const SerializationError& e) {
    throw SerializationError(name + ": " + e.what() + archive.read_error);
  }
}

// Catches what LibTorch and the allocator throw and reports it as ours, prefixed with `name`.
template <typename F>
auto reporting_errors(const std::string& name, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const SerializationError&) {
    throw;
  } catch (const c10::Error& e) {
    throw SerializationError(name + ": " + libtorch_message(e));
  } catch (const std::bad_alloc&) {
    throw SerializationError(name + ": out of memory");
  } catch (const std::exception& e) {
    throw SerializationError(name + ": " + e.what());
  }
}

using Records = std::vector<std::pair<std::string, std::string>>;

// Writes the records in the order torch.save does, then `extra` (the writer adds "version" last).
void stream_archive(const Pickled& p, const Records& extra, const std::function<size_t(const void*, size_t)>& sink) {
  static const std::set<std::string> kReserved = {"data.pkl", "byteorder", "version", ".data/version"};
  for (const auto& [name, bytes] : extra) {
    if (kReserved.count(name) != 0 || name.rfind("data/", 0) == 0 || name.empty()) {
      throw SerializationError("extra record name '" + printable(name) + "' is taken by torch.save's format");
    }
  }
  auto writer = std::make_unique<caffe2::serialize::PyTorchStreamWriter>(sink);
  try {
    writer->writeRecord("data.pkl", p.bytes.data(), p.bytes.size());
    writer->writeRecord("byteorder", "little", 6);  // what torch 2.x writes; 1.13 ignores it
    static const char kNothing = 0;
    for (size_t i = 0; i < p.storages.size(); ++i) {
      const at::Tensor& s = p.storages[i];
      const size_t nbytes = s.nbytes();
      writer->writeRecord("data/" + std::to_string(i), nbytes ? s.data_ptr() : &kNothing, nbytes);
    }
    for (const auto& [name, bytes] : extra) writer->writeRecord(name, bytes.data(), bytes.size());
    writer->writeEndOfFile();
  } catch (...) {
    // Destroying a writer that failed would finalize it again and throw from its destructor,
    // terminating the process; leaking it (memory only: the sink owns any file) is the lesser evil.
    (void)writer.release();
    throw;
  }
}

[[noreturn]] void fail_errno(const std::string& path, const std::string& what, int err) {
  throw SerializationError(path + ": " + what + ": " + std::strerror(err));
}

}  // namespace

Value load_torch_bytes(const std::string& bytes, const std::string& name) {
  return reporting_errors(name, [&] {
    return read_archive(std::make_shared<BytesReadAdapter>(bytes), name, nullptr);
  });
}

Value load_torch_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail_errno(path, "cannot open", errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    fail_errno(path, "cannot open", err);
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    fail_errno(path, "cannot open", EISDIR);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw SerializationError(path + ": cannot open: not a regular file");
  }
  // From here the adapter owns the descriptor.
  auto file = std::make_shared<FileReadAdapter>(fd, static_cast<size_t>(st.st_size));
  return reporting_errors(path, [&] { return read_archive(file, path, file.get()); });
}

std::string save_torch_bytes(const Value& v) {
  return write_archive(reporting_errors("save_torch_bytes", [&] { return pickle(v); }), "archive");
}

std::string write_archive(const Pickled& pickled, const std::string& archive_name, const Records& extra_records) {
  if (archive_name != "archive") {
    throw SerializationError("write_archive: the folder can only be 'archive' (LibTorch's writer names it when "
                             "writing through a callback), not '" + printable(archive_name) + "'");
  }
  return reporting_errors("write_archive", [&] {
    std::string out;
    stream_archive(pickled, extra_records, [&](const void* data, size_t n) {
      out.append(static_cast<const char*>(data), n);
      return n;
    });
    return out;
  });
}

Records read_records(const std::string& bytes, const std::string& name) {
  return reporting_errors(name, [&] {
    const OpenArchive archive = open_archive(std::make_shared<BytesReadAdapter>(bytes), name, nullptr);
    Records records;
    try {
      for (const auto& [record, vetted] : archive.dir->records()) {
        const at::DataPtr data = read_record(*archive.reader, vetted, record);
        records.emplace_back(record, std::string(static_cast<const char*>(data.get()), vetted.size));
      }
    } catch (const SerializationError& e) {
      throw SerializationError(name + ": " + e.what());
    }
    return records;
  });
}

void save_torch_file(const std::string& path, const Value& v) {
  // Pickle first: a value that cannot be saved must not leave a temporary file behind.
  const Pickled p = reporting_errors(path, [&] { return pickle(v); });

  std::string tmp = path + ".tmp.XXXXXX";
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) fail_errno(path, "cannot create a temporary file", errno);
  auto abandon = [&]() {
    ::close(fd);
    ::unlink(tmp.c_str());
  };

  // The sink reports success to the writer whatever happens (see the top of this file) and keeps
  // the first error; after an error it stops writing.
  int write_error = 0;
  auto sink = [&](const void* data, size_t n) -> size_t {
    size_t done = 0;
    while (write_error == 0 && done < n) {
      const ssize_t w = ::write(fd, static_cast<const char*>(data) + done, n - done);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) {
        write_error = errno;
      } else {
        done += static_cast<size_t>(w);
      }
    }
    return n;
  };
  try {
    reporting_errors(path, [&] { stream_archive(p, {}, sink); });
  } catch (...) {
    abandon();
    throw;
  }
  if (write_error != 0) {
    abandon();
    fail_errno(path, "cannot write", write_error);
  }
  // The data must be on disk before the rename makes it visible under the final name.
  if (::fsync(fd) != 0) {
    const int err = errno;
    abandon();
    fail_errno(path, "cannot write", err);
  }
  ::fchmod(fd, 0644);  // mkstemp creates 0600; checkpoints are ordinary result files
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    fail_errno(path, "cannot write", err);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    fail_errno(path, "cannot rename " + tmp + " onto it", err);
  }
  // Make the rename itself durable; a failure here does not undo the save, so it is not reported.
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
}

StateDict to_state_dict(const Value& v, const std::string& source) {
  auto a = [](const Value& x) { return std::string(x.kind() == Value::Kind::Int ? "an " : "a ") + x.kind_name(); };
  if (v.kind() != Value::Kind::Dict) {
    throw SerializationError(source + ": expected a state dict (a dict of tensors), got " + a(v));
  }
  StateDict sd;
  sd.reserve(v.entries().size());
  for (const auto& [key, value] : v.entries()) {
    if (key.kind() != Value::Kind::String) {
      throw SerializationError(source + ": expected a state dict, but it has a key of type " + key.kind_name() +
                               (key.kind() == Value::Kind::Int ? " (" + std::to_string(key.as_int()) + ")" : ""));
    }
    if (value.kind() != Value::Kind::Tensor) {
      throw SerializationError(source + ": expected a state dict, but entry '" + key.as_string() + "' is " + a(value) +
                               ", not a tensor");
    }
    sd.emplace_back(key.as_string(), value.as_tensor());
  }
  return sd;
}

Value from_state_dict(const StateDict& sd) {
  std::vector<Value::Entry> entries;
  entries.reserve(sd.size());
  for (const auto& [name, tensor] : sd) entries.emplace_back(Value::string(name), Value::tensor(tensor));
  return Value::ordered_dict(std::move(entries));
}

StateDict consume_prefix(StateDict sd, const std::string& prefix) {
  for (auto& entry : sd) {
    if (entry.first.rfind(prefix, 0) == 0) entry.first.erase(0, prefix.size());
  }
  return sd;
}

}  // namespace wavetrain::serialization
