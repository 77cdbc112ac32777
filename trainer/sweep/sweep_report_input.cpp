// The sweep report's input (sweep_report.h): a sweep directory's summary.json, or any set of run
// directories, read into a ReportInput, with what each job's own files add (objective, steps,
// seconds, the end of its log).
#include "trainer/sweep/sweep_report.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>
#include <sstream>
#include <stdexcept>

#include "trainer/plot/html_page.h"
#include "trainer/plot/svg_plot.h"
#include "trainer/serialization/atomic_file.h"
#include "trainer/sweep/run_files.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace wavetrain::sweep {
namespace {

constexpr int kLogTailLines = 15;

std::optional<double> number_at(const json& flat, const std::string& key) {
  if (flat.is_object() && flat.contains(key) && flat[key].is_number()) return flat[key].get<double>();
  return std::nullopt;
}

std::vector<std::pair<std::string, std::string>> params_of(const std::vector<std::string>& overrides) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::string& o : overrides) {
    // Every run has its own directory: where it ran is not a parameter.
    if (const auto kv = override_key_value(o); kv && kv->first != "run.dir") out.push_back(*kv);
  }
  return out;
}

// Drops the params whose values are the same in every job (absent counts as a value of its own).
void keep_varying(std::vector<ReportJob>& jobs) {
  std::map<std::string, std::set<std::string>> values;
  for (const ReportJob& j : jobs)
    for (const auto& [k, v] : j.params) values[k].insert(v);
  std::set<std::string> varying;
  for (const auto& [k, seen] : values) {
    const bool everywhere = std::all_of(jobs.begin(), jobs.end(), [&, &key = k](const ReportJob& j) {
      return std::any_of(j.params.begin(), j.params.end(), [&](const auto& p) { return p.first == key; });
    });
    if (seen.size() > 1 || !everywhere) varying.insert(k);
  }
  for (ReportJob& j : jobs)
    j.params.erase(std::remove_if(j.params.begin(), j.params.end(), [&](const auto& p) { return !varying.count(p.first); }), j.params.end());
}

std::string text_of(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

// The last step in a metrics.csv: how far a job without a result got.
int64_t last_step(const fs::path& metrics_csv) {
  double last = 0;
  for (const auto& [name, s] : plot::read_metrics_csv(metrics_csv))
    for (double x : s.x) last = std::max(last, x);
  return static_cast<int64_t>(last);
}

}  // namespace

ReportInput report_input_from_sweep(const fs::path& sweep_dir) {
  const fs::path summary_path = sweep_dir / "summary.json";
  if (!fs::is_regular_file(summary_path)) throw std::runtime_error("No sweep summary: '" + summary_path.string() + "' does not exist");
  const json summary = json::parse(plot::read_text(summary_path), nullptr, /*allow_exceptions=*/false);
  if (summary.is_discarded() || !summary.is_object())
    throw std::runtime_error("Cannot read the sweep summary '" + summary_path.string() + "': not a JSON object");
  ReportInput input;
  input.title = sweep_dir.string();
  if (summary.contains("objective") && summary["objective"].is_string()) input.objective = summary["objective"].get<std::string>();
  if (summary.contains("mode") && summary["mode"].is_string()) input.mode = summary["mode"].get<std::string>();
  bool all_have_params = true;
  const json jobs = summary.contains("jobs") && summary["jobs"].is_array() ? summary["jobs"] : json::array();
  for (size_t i = 0; i < jobs.size(); ++i) {
    const json& j = jobs[i];
    if (!j.is_object()) continue;
    ReportJob job;
    job.name = j.contains("job") ? text_of(j["job"]) : std::to_string(i);
    job.run_dir = sweep_dir / job.name;
    job.status = j.contains("status") && j["status"].is_string() ? j["status"].get<std::string>() : "pending";
    if (j.contains("params") && j["params"].is_object()) {
      for (auto it = j["params"].begin(); it != j["params"].end(); ++it) job.params.emplace_back(it.key(), text_of(it.value()));
    } else {
      all_have_params = false;
      std::vector<std::string> overrides;
      if (j.contains("overrides") && j["overrides"].is_array())
        for (const json& o : j["overrides"])
          if (o.is_string()) overrides.push_back(o.get<std::string>());
      job.params = params_of(overrides);
    }
    // The summary's own numbers first; the job's result.json for what an older summary lacks.
    const json metrics = j.contains("metrics") && j["metrics"].is_object() ? j["metrics"] : json::object();
    const json result = read_result_metrics(job.run_dir / "result.json");
    if (j.contains("objective")) {
      if (j["objective"].is_number()) job.objective = j["objective"].get<double>();
    } else {
      job.objective = objective_from(metrics, input.objective);
      if (!job.objective) job.objective = objective_from(result, input.objective);
    }
    if (const auto s = number_at(j, "seconds")) job.seconds = *s;
    else if (const auto r = number_at(result, "seconds")) job.seconds = *r;
    if (const auto s = number_at(j, "steps")) job.steps = static_cast<int64_t>(*s);
    else if (const auto m = number_at(metrics, "global_step")) job.steps = static_cast<int64_t>(*m);
    else if (const auto r = number_at(result, "global_step")) job.steps = static_cast<int64_t>(*r);
    else job.steps = last_step(job.run_dir / "metrics.csv");
    if (j.contains("error") && j["error"].is_string()) job.error_tail = j["error"].get<std::string>();
    else if (job.status == "failed" || job.status == "interrupted" || job.status == "stopped") job.error_tail = log_tail(sweep_dir / "logs" / (job.name + ".log"), kLogTailLines);
    input.jobs.push_back(std::move(job));
  }
  if (!all_have_params) keep_varying(input.jobs);
  return input;
}

ReportInput report_input_from_runs(const std::vector<fs::path>& run_dirs, const std::string& objective, const std::string& mode) {
  ReportInput input;
  // The runs' common parent names the report; each run is named by its path below it.
  std::vector<fs::path> dirs;
  for (const fs::path& d : run_dirs) dirs.push_back(normal_path(d));
  fs::path common = dirs.empty() ? fs::path() : dirs.size() == 1 ? dirs[0].parent_path() : dirs[0];
  for (const fs::path& d : dirs) {
    fs::path prefix;
    for (auto a = common.begin(), b = d.begin(); a != common.end() && b != d.end() && *a == *b; ++a, ++b) prefix /= *a;
    common = prefix;
  }
  if (std::find(dirs.begin(), dirs.end(), common) != dirs.end()) common = common.parent_path();  // a run inside another
  input.title = common.string();

  std::set<std::string> monitors, modes;
  std::vector<json> results;  // flattened result.json of each run; the objective is known after the loop
  for (size_t i = 0; i < dirs.size(); ++i) {
    ReportJob job;
    job.run_dir = run_dirs[i];
    job.name = dirs[i].lexically_relative(common).string();
    std::vector<std::string> overrides;
    const fs::path overrides_yaml = dirs[i] / ".wavetrain/overrides.yaml";
    if (fs::is_regular_file(overrides_yaml)) {
      try {
        const YAML::Node list = YAML::LoadFile(overrides_yaml.string());
        if (list.IsSequence())
          for (const YAML::Node& o : list) overrides.push_back(o.as<std::string>());
      } catch (const YAML::Exception& e) {
        throw std::runtime_error("Cannot read '" + overrides_yaml.string() + "': " + e.what());
      }
    }
    job.params = params_of(overrides);
    // The config as resolved, so that an interpolated monitor reads as its value.
    fs::path config = dirs[i] / ".wavetrain/config.resolved.yaml";
    if (!fs::is_regular_file(config)) config = dirs[i] / ".wavetrain/config.yaml";
    std::string monitor, run_mode = "min";
    try {
      const YAML::Node c = fs::is_regular_file(config) ? YAML::LoadFile(config.string()) : YAML::Node();
      if (c.IsMap() && c["trainer"] && c["trainer"].IsMap()) {
        if (c["trainer"]["monitor"] && c["trainer"]["monitor"].IsScalar()) monitor = c["trainer"]["monitor"].as<std::string>();
        if (c["trainer"]["mode"] && c["trainer"]["mode"].IsScalar()) run_mode = c["trainer"]["mode"].as<std::string>();
      }
    } catch (const YAML::Exception& e) {
      throw std::runtime_error("Cannot read '" + config.string() + "': " + e.what());
    }
    monitors.insert(monitor);
    modes.insert(run_mode);
    const fs::path result_json = dirs[i] / "result.json";
    const json& result = results.emplace_back(read_result_metrics(result_json));
    if (fs::is_regular_file(result_json) && !result.empty()) {
      job.status = "done";
      job.seconds = number_at(result, "seconds").value_or(0);
      job.steps = static_cast<int64_t>(number_at(result, "global_step").value_or(0));
    } else {
      job.status = "unfinished";
      job.steps = last_step(dirs[i] / "metrics.csv");
      job.error_tail = log_tail(dirs[i] / "wavetrain.log", kLogTailLines);
    }
    input.jobs.push_back(std::move(job));
  }
  keep_varying(input.jobs);
  input.objective = objective;
  if (objective.empty() && monitors.size() == 1) input.objective = *monitors.begin();
  input.mode = !mode.empty() ? mode : modes.size() == 1 ? *modes.begin() : "min";
  for (size_t i = 0; i < dirs.size(); ++i) input.jobs[i].objective = objective_from(results[i], input.objective);
  return input;
}

}  // namespace wavetrain::sweep
