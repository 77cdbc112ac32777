// Test support: runs a shell command and collects its exit code, stdout and stderr, as a user at a
// terminal would see them. Used by the tests that drive the wavetrain binary.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace wavetrain::testing {

struct ProcessResult {
  int exit_code = -1;  // -1 when the command could not start or was killed by a signal
  std::string out;
  std::string err;
};

inline ProcessResult run_shell(const std::string& command) {
  // A stderr file of its own per call: ctest runs tests in parallel processes.
  std::string err_path = ::testing::TempDir() + "wavetrain_stderr_XXXXXX";
  const int fd = mkstemp(err_path.data());
  if (fd >= 0) close(fd);
  ProcessResult r;
  FILE* pipe = popen((command + " 2>'" + err_path + "'").c_str(), "r");
  if (pipe) {
    std::array<char, 4096> buf{};
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.out.append(buf.data(), n);
    const int status = pclose(pipe);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  std::ifstream err(err_path);
  std::stringstream ss;
  ss << err.rdbuf();
  r.err = ss.str();
  std::remove(err_path.c_str());
  return r;
}

#ifdef WAVETRAIN_TEST_PYTHON
// The standard output of tests/python/<script> run by the test-only Python (Debian's python3 with
// python3-torch and friends); empty when that Python or a module it imports is missing, so the
// caller can skip with a message naming the package.
inline std::string python_output(const std::string& script_and_arguments) {
  return run_shell(std::string(WAVETRAIN_TEST_PYTHON) + " " + WAVETRAIN_TEST_DATA + "/../python/" + script_and_arguments).out;
}
#endif

#ifdef WAVETRAIN_CLIENT_PYTHON
// tests/python/<script> run by the project's .venv Python, which holds the real programs wavetrain is
// checked against (TensorBoard, Hydra, auraloss, neural-amp-modeler, torchaudio 2.x; scripts/setup
// --test-deps installs them).
inline ProcessResult client_run(const std::string& script_and_arguments) {
  return run_shell(std::string(WAVETRAIN_CLIENT_PYTHON) + " " + WAVETRAIN_TEST_DATA + "/../python/" + script_and_arguments);
}
inline bool client_importable(const std::string& module) {
  return run_shell(std::string(WAVETRAIN_CLIENT_PYTHON) + " -c 'import " + module + "' >/dev/null").exit_code == 0;
}
#endif

// scripts/test sets WAVETRAIN_TEST_REQUIRE_CLIENTS=1: a missing client is then a failure, not a skip.
inline bool clients_required() {
  const char* v = std::getenv("WAVETRAIN_TEST_REQUIRE_CLIENTS");
  return v != nullptr && std::string(v) == "1";
}

#ifdef WAVETRAIN_BINARY
// Runs the wavetrain binary under test in `dir` (made if missing), with `env` ("VAR=value ...") set.
inline ProcessResult wavetrain_in(const std::filesystem::path& dir, const std::string& args, const std::string& env = "") {
  std::filesystem::create_directories(dir);
  return run_shell("cd '" + dir.string() + "' && env " + env + " '" WAVETRAIN_BINARY "' " + args);
}
#endif

}  // namespace wavetrain::testing

// Skips the test when a test-only client is missing, or fails it where clients are required.
#define WAVETRAIN_REQUIRE_CLIENT(available, what)                                                  \
  do {                                                                                           \
    if (!(available)) {                                                                          \
      if (::wavetrain::testing::clients_required()) FAIL() << (what) << " (scripts/setup --test-deps)"; \
      GTEST_SKIP() << (what) << " (scripts/setup --test-deps installs it)";                      \
    }                                                                                            \
  } while (0)
