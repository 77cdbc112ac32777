// Multirun's records: multirun.yaml (written when a multirun starts, read back to resume it), and
// summary.json, summary.csv, the table and the best job as the driver keeps them; see multirun.h.
// The running loop is in multirun.cpp.
#include "trainer/sweep/multirun.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <map>
#include <ostream>
#include <set>
#include <sstream>
#include <stdexcept>

#include "trainer/config/config.h"
#include "trainer/config/node.h"
#include "trainer/config/yaml_io.h"
#include "trainer/serialization/atomic_file.h"
#include "trainer/sweep/multirun_internal.h"
#include "trainer/sweep/run_files.h"
#include "trainer/sweep/stop_protocol.h"

namespace fs = std::filesystem;

namespace wavetrain {
namespace {

nlohmann::json swept_params(const std::vector<JobOutcome>& jobs, size_t index) {
  std::map<std::string, std::set<std::string>> values;
  for (const JobOutcome& j : jobs)
    for (const std::string& o : j.overrides)
      if (const auto kv = sweep::override_key_value(o)) values[kv->first].insert(kv->second);
  nlohmann::json params = nlohmann::json::object();
  for (const std::string& o : jobs[index].overrides)
    if (const auto kv = sweep::override_key_value(o); kv && (jobs.size() == 1 || values[kv->first].size() > 1))
      params[kv->first] = kv->second;
  return params;
}

config::Node strings_node(const std::vector<std::string>& items) {
  config::Node n = config::Node::sequence();
  for (const std::string& s : items) n.push_back(config::Node::string(s));
  return n;
}

}  // namespace

namespace sweep::detail {

void Driver::pick_best() {
  summary_.failed = 0;
  summary_.best.reset();
  for (const JobOutcome& j : summary_.jobs)
    if (j.status == "failed" || j.status == "interrupted") ++summary_.failed;  // the sweep is not complete
  if (opt_.objective.empty()) return;
  for (const JobOutcome& j : summary_.jobs) {
    if (j.status != "done" || !j.objective || std::isnan(*j.objective)) continue;
    const std::optional<double> best = summary_.best ? summary_.jobs[*summary_.best].objective : std::nullopt;
    if (!best || (opt_.mode == "max" ? *j.objective > *best : *j.objective < *best)) summary_.best = j.index;
  }
}

void Driver::save() const {
  nlohmann::json j;
  j["strategy"] = opt_.strategy;
  j["launcher"] = launcher_->name();
  j["jobs"] = nlohmann::json::array();
  for (const JobOutcome& job : summary_.jobs) {
    nlohmann::json r = {{"job", job.index}, {"overrides", job.overrides}, {"params", swept_params(summary_.jobs, job.index)},
                        {"status", job.status}, {"exit_code", job.exit_code}, {"seconds", job.seconds}, {"steps", job.steps},
                        {"objective", job.objective ? nlohmann::json(*job.objective) : nlohmann::json(nullptr)},
                        {"metrics", job.metrics}};
    if (opt_.strategy == "asha") {
      r["rung"] = job.rung;
      r["rung_objectives"] = job.rung_objectives;
    }
    if (!job.note.empty()) r["note"] = job.note;
    if (!job.error.empty()) r["error"] = job.error;
    if (!job.launcher_record.is_null()) r["launcher"] = job.launcher_record;
    j["jobs"].push_back(r);
  }
  j["failed"] = summary_.failed;
  if (!opt_.objective.empty()) {
    j["objective"] = opt_.objective;
    j["mode"] = opt_.mode;
    j["best_job"] = summary_.best ? nlohmann::json(*summary_.best) : nlohmann::json(nullptr);
  }
  write_file_atomic((opt_.dir / "summary.json").string(), j.dump(2) + "\n");

  // summary.csv: the fixed columns, then every metric of result.json that is not one of them.
  const std::vector<std::string> fixed = {"job", "overrides", "status", "exit_code", "seconds", "steps"};
  std::vector<std::string> metric_names;
  for (const JobOutcome& job : summary_.jobs)
    for (auto it = job.metrics.begin(); it != job.metrics.end(); ++it)
      if (std::find(metric_names.begin(), metric_names.end(), it.key()) == metric_names.end() &&
          std::find(fixed.begin(), fixed.end(), it.key()) == fixed.end() && it.key() != "global_step")
        metric_names.push_back(it.key());
  auto csv_field = [](const std::string& s) {
    if (s.find_first_of(",\"\n") == std::string::npos) return s;
    std::string q = "\"";
    for (char c : s) q += (c == '"' ? std::string("\"\"") : std::string(1, c));
    return q + "\"";
  };
  std::string csv = join(fixed, ",");
  for (const std::string& m : metric_names) csv += "," + csv_field(m);
  csv += "\n";
  for (const JobOutcome& job : summary_.jobs) {
    std::ostringstream row;
    row << job.index << "," << csv_field(join(job.overrides, " ")) << "," << job.status << "," << job.exit_code << ","
        << std::setprecision(4) << job.seconds << "," << job.steps;
    for (const std::string& m : metric_names) row << "," << (job.metrics.contains(m) ? job.metrics[m].dump() : "");
    csv += row.str() + "\n";
  }
  write_file_atomic((opt_.dir / "summary.csv").string(), csv);
}

void Driver::print_table() const {
  const bool asha = opt_.strategy == "asha";
  out_ << "\n" << std::left << std::setw(5) << "job" << std::setw(13) << "status" << std::setw(10) << "duration";
  if (asha) out_ << std::setw(6) << "rung";
  if (!opt_.objective.empty()) out_ << std::setw(14) << opt_.objective;
  out_ << "overrides\n";
  std::map<std::string, size_t> counts;
  for (const JobOutcome& j : summary_.jobs) {
    ++counts[j.status];
    out_ << std::setw(5) << j.index << std::setw(13) << j.status << std::setw(10) << format_seconds(j.seconds);
    if (asha) out_ << std::setw(6) << j.rung;
    if (!opt_.objective.empty()) {
      std::ostringstream s;
      if (j.objective) s << std::setprecision(6) << *j.objective;
      out_ << std::setw(14) << (j.objective ? s.str() : "-");
    }
    out_ << join(j.overrides, " ") << "\n";
  }
  out_ << "\n";
  bool first = true;
  for (const std::string s : {"done", "stopped", "interrupted", "failed", "pending", "running"})
    if (counts[s] > 0 || s == "done" || s == "failed") {
      out_ << (first ? "" : ", ") << counts[s] << " " << s;
      first = false;
    }
  int64_t steps = 0;
  for (const JobOutcome& j : summary_.jobs) steps += j.steps;
  out_ << "; " << steps << " training steps in all; summary in " << (opt_.dir / "summary.csv").string() << "\n";
  if (summary_.best)
    out_ << "best (" << opt_.mode << " " << opt_.objective << "): job " << *summary_.best << ": "
         << join(summary_.jobs[*summary_.best].overrides, " ") << "\n";
}

}  // namespace sweep::detail

using sweep::detail::Driver;

MultirunSummary run_multirun(const std::vector<std::vector<std::string>>& trials, const MultirunOptions& options,
                             std::ostream& out) {
  if (options.strategy != "grid" && options.strategy != "random" && options.strategy != "asha")
    throw config::ConfigError("sweep.strategy='" + options.strategy + "': expected grid, random or asha");
  Driver driver(options, out);  // checks the launcher and ASHA's options before anything is written
  config::Node record = config::Node::mapping();
  record.set("command", strings_node(options.command));
  config::Node list = config::Node::sequence();
  std::vector<JobOutcome> outcomes;
  for (size_t i = 0; i < trials.size(); ++i) {
    list.push_back(strings_node(trials[i]));
    JobOutcome j;
    j.index = i;
    j.overrides = trials[i];
    outcomes.push_back(j);
  }
  record.set("jobs", list);
  record.set("objective", config::Node::string(options.objective));
  record.set("mode", config::Node::string(options.mode));
  record.set("strategy", config::Node::string(options.strategy));
  record.set("parallel", config::Node::integer(options.parallel));
  if (options.strategy == "asha") {
    config::Node a = config::Node::mapping();
    a.set("resource", config::Node::string(options.asha_resource));
    a.set("min_resource", config::Node::integer(options.asha.min_resource));
    a.set("max_resource", config::Node::integer(options.asha.max_resource));
    a.set("eta", config::Node::floating(options.asha.eta));
    record.set("asha", a);
  }
  record.set("launcher", options.launcher.is_null() ? config::Node::mapping() : options.launcher);
  write_file_atomic((options.dir / "multirun.yaml").string(), config::to_yaml(record));
  return driver.run(std::move(outcomes));
}

MultirunSummary resume_multirun(const MultirunOptions& options, std::ostream& out) {
  const fs::path yaml = options.dir / "multirun.yaml";
  if (!fs::is_regular_file(yaml))
    throw std::runtime_error("Cannot resume '" + options.dir.string() + "': it holds no multirun.yaml");
  const config::Node record = config::load_yaml_file(yaml.string());
  MultirunOptions opt = options;
  auto text = [&](const char* key, const std::string& fallback) {
    const config::Node* n = record.find(key);
    return n && n->kind() == config::Node::Kind::String ? n->string_value() : fallback;
  };
  if (opt.command.empty() && record.find("command"))
    for (const config::Node& c : record.find("command")->items()) opt.command.push_back(c.string_value());
  if (opt.objective.empty()) opt.objective = text("objective", "");
  opt.mode = text("mode", opt.mode);
  opt.strategy = text("strategy", "grid");
  if (options.parallel <= 1 && record.find("parallel")) opt.parallel = static_cast<int>(record.find("parallel")->int_value());
  if (const config::Node* a = record.find("asha")) {
    auto field = [&](const char* key) -> const config::Node& {
      const config::Node* n = a->is_mapping() ? a->find(key) : nullptr;
      if (!n) throw std::runtime_error("Cannot resume '" + opt.dir.string() + "': " + yaml.string() + " has no asha." + key);
      return *n;
    };
    opt.asha_resource = field("resource").string_value();
    opt.asha.min_resource = config::to_int(field("min_resource"), "asha.min_resource");
    opt.asha.max_resource = config::to_int(field("max_resource"), "asha.max_resource");
    opt.asha.eta = config::to_float(field("eta"), "asha.eta");
  }
  if (const config::Node* l = record.find("launcher")) opt.launcher = *l;

  std::vector<JobOutcome> outcomes;
  const config::Node* jobs = record.find("jobs");
  for (size_t i = 0; jobs && i < jobs->items().size(); ++i) {
    JobOutcome j;
    j.index = i;
    for (const config::Node& o : jobs->items()[i].items()) j.overrides.push_back(o.string_value());
    outcomes.push_back(j);
  }
  // Keep what finished (and, for ASHA, every rung a trial finished); jobs that were running may
  // still be on a cluster; everything else runs again.
  std::ifstream in(opt.dir / "summary.json");
  if (in) {
    const nlohmann::json s = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (s.is_object() && s.contains("jobs") && s["jobs"].is_array())
      for (const nlohmann::json& j : s["jobs"]) try {
        const size_t i = j.value("job", outcomes.size());
        if (i >= outcomes.size()) continue;
        JobOutcome& o = outcomes[i];
        const std::string status = j.value("status", "");
        o.launcher_record = j.value("launcher", nlohmann::json(nullptr));
        if (j.contains("rung_objectives") && j["rung_objectives"].is_array())
          o.rung_objectives = j["rung_objectives"].get<std::vector<double>>();
        o.rung = j.value("rung", -1);
        const bool keep = status == "done" || status == "stopped" || (status == "failed" && opt.strategy == "asha");
        if (keep) {
          o.status = status;
          o.seconds = j.value("seconds", 0.0);
          o.steps = j.value("steps", int64_t{0});
          o.metrics = j.value("metrics", nlohmann::json::object());
          if (j.contains("objective") && j["objective"].is_number()) o.objective = j["objective"].get<double>();
        } else if (status == "running") {
          o.status = "running";  // on a cluster it may still be; else it goes on from its checkpoint
          o.continue_run = true;
        } else if (status == "pending") {
          o.continue_run = true;  // a queued job that a stop dropped may have a checkpoint from before
        } else if (status == "interrupted" || (status == "failed" && j.value("exit_code", 0) == kExitInterrupted)) {
          o.continue_run = true;  // stopped by a signal with its checkpoint saved: it goes on from there
        }
      } catch (const nlohmann::json::exception& e) {
        throw std::runtime_error("Cannot resume '" + opt.dir.string() + "': " + (opt.dir / "summary.json").string() +
                                 " has a job record that is not what a multirun writes (" + e.what() + ")");
      }
  }
  // Failed grid and random jobs run again; an ASHA trial that failed stays out of the race.
  return Driver(opt, out).run(std::move(outcomes));
}

}  // namespace wavetrain
