// Reading back a sweep's job files; see run_files.h.
#include "trainer/sweep/run_files.h"

#include <cmath>
#include <deque>
#include <fstream>
#include <sstream>

namespace fs = std::filesystem;

namespace wavetrain::sweep {
namespace {

void flatten(const nlohmann::json& j, const std::string& prefix, nlohmann::json& out) {
  if (j.is_number()) {
    out[prefix] = j;
  } else if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) flatten(it.value(), prefix.empty() ? it.key() : prefix + "." + it.key(), out);
  }
}

std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> f;
  std::string cell;
  std::istringstream s(line);
  while (std::getline(s, cell, ',')) f.push_back(cell);
  if (!line.empty() && line.back() == ',') f.emplace_back();
  return f;
}

}  // namespace

nlohmann::json read_result_metrics(const fs::path& result_json) {
  nlohmann::json flat = nlohmann::json::object();
  std::ifstream in(result_json);
  if (!in) return flat;
  // A job that died while writing it has no usable metrics; its status says what happened.
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_discarded()) flatten(j, "", flat);
  return flat;
}

std::optional<double> objective_from(const nlohmann::json& flat, const std::string& objective) {
  if (objective.empty() || !flat.is_object()) return std::nullopt;
  for (const std::string& key : {"best." + objective, "last." + objective, objective})
    if (flat.contains(key) && flat[key].is_number()) return flat[key].get<double>();
  return std::nullopt;
}

std::optional<double> latest_metric(const fs::path& metrics_csv, const std::string& metric) {
  std::ifstream in(metrics_csv);
  std::string header;
  if (!in || !std::getline(in, header)) return std::nullopt;
  const std::vector<std::string> names = csv_fields(header);
  size_t column = 0;
  while (column < names.size() && names[column] != metric) ++column;
  if (column == names.size()) return std::nullopt;
  std::optional<double> latest;
  for (std::string line; std::getline(in, line);) {
    if (in.eof()) break;  // a last row without its newline is still being written
    const std::vector<std::string> f = csv_fields(line);
    if (column >= f.size() || f[column].empty()) continue;
    char* end = nullptr;
    const double v = std::strtod(f[column].c_str(), &end);
    if (end == f[column].c_str() + f[column].size()) latest = v;
  }
  return latest;
}

std::string log_tail(const fs::path& file, int lines) {
  std::ifstream in(file);
  std::deque<std::string> last;
  for (std::string line; std::getline(in, line);) {
    last.push_back(line);
    if (static_cast<int>(last.size()) > lines) last.pop_front();
  }
  std::string out;
  for (const std::string& l : last) out += l + "\n";
  return out;
}

fs::path normal_path(const fs::path& p) {
  fs::path a = fs::absolute(p).lexically_normal();
  return a.filename().empty() ? a.parent_path() : a;
}

std::optional<std::pair<std::string, std::string>> override_key_value(const std::string& override_text) {
  const size_t eq = override_text.find('=');
  if (eq == std::string::npos) return std::nullopt;
  const size_t start = override_text.find_first_not_of("+~");
  if (start >= eq) return std::nullopt;
  return std::make_pair(override_text.substr(start, eq - start), override_text.substr(eq + 1));
}

}  // namespace wavetrain::sweep
