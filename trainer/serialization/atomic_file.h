// Writing files so that a reader never sees half of one: write a temporary file next to the
// target, flush it to disk, then rename it over the target (rename is atomic on POSIX).
#pragma once

#include <string>

namespace wavetrain {

// Throws std::runtime_error naming the path and the system error.
void write_file_atomic(const std::string& path, const std::string& content);

}  // namespace wavetrain
