// Fuzz-target support: the readers under test take file paths, so each input is written to a file
// of its own (in /dev/shm when it exists: no disk traffic at thousands of runs a second), and the
// one rule every target checks: an error must name the file it is about.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

namespace wavetrain::fuzz {

class InputFile {
 public:
  InputFile(const uint8_t* data, size_t size, const char* suffix) {
    const char* dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    path_ = std::string(dir) + "/wavetrain_fuzz_" + std::to_string(::getpid()) + suffix;
    FILE* f = std::fopen(path_.c_str(), "wb");
    if (!f || (size > 0 && std::fwrite(data, 1, size, f) != size)) std::abort();
    std::fclose(f);
  }
  ~InputFile() { std::remove(path_.c_str()); }
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A reader's error must start with "<path>: " (every reader here promises that); anything else is a
// finding, reported as a crash so that libFuzzer keeps the input.
inline void require_named(const std::exception& e, const std::string& path) {
  const std::string what = e.what();
  if (what.rfind(path + ": ", 0) != 0) {
    std::fprintf(stderr, "error does not name the file: %s\n", what.c_str());
    std::abort();
  }
}

}  // namespace wavetrain::fuzz
