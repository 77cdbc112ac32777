// Writing files so that a reader never sees half of one: write a temporary file next to the
// target, flush it to disk, then rename it over the target (rename is atomic on POSIX).
#pragma once

#include <string>

namespace wavetrain {

// Throws std::runtime_error naming the path and the system error. The temporary is NAME.tmp.XXXXXX
// (mkstemp's six characters); it is removed on any failure, but a process killed while writing
// leaves it behind: see remove_stale_temporaries.
void write_file_atomic(const std::string& path, const std::string& content);

// Whether `file_name` (no directory) is one of write_file_atomic's temporaries.
bool is_atomic_temporary(const std::string& file_name);

// Removes write_file_atomic's temporaries directly in `dir` (none in its subdirectories): for a
// directory that no live process writes to (a run directory whose lock this process holds).
// Returns how many were removed; a missing directory has none.
int remove_stale_temporaries(const std::string& dir);

// Removes the temporaries that killed earlier writes of `path` left (PATH.tmp.XXXXXX): for a
// command that writes one file (`export nam -o x.nam`) before it writes it again.
int remove_stale_temporaries_of(const std::string& path);

}  // namespace wavetrain
