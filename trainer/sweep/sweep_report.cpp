// The sweep report (sweep_report.h): the numbers the page shows (best job, log axes, parameter
// importance) and the page itself. What it reads is made in sweep_report_input.cpp.
#include "trainer/sweep/sweep_report.h"

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

bool parse_number(const std::string& text, double& v) {  // all of the text, as a finite number
  char* end = nullptr;
  v = std::strtod(text.c_str(), &end);
  return !text.empty() && end == text.c_str() + text.size() && std::isfinite(v);
}

// One swept parameter across all jobs: numeric when every value it has reads as a number.
struct Param {
  std::string name;
  bool numeric = true, log = false;
  std::vector<std::string> text;        // per job; "" where the job does not have it
  std::vector<double> values;           // per job: the number, or the index into categories; NaN where missing
  std::vector<std::string> categories;  // categorical: the values, sorted
};

std::vector<Param> collect_params(const ReportInput& input) {
  std::vector<Param> params;
  std::map<std::string, size_t> index;
  for (const ReportJob& j : input.jobs)
    for (const auto& [k, v] : j.params)
      if (!index.count(k)) index[k] = params.size(), params.push_back(Param{k, true, false, {}, {}, {}});
  for (Param& p : params) {
    std::vector<bool> has;
    for (const ReportJob& j : input.jobs) {
      std::string text;
      bool found = false;
      for (const auto& [k, v] : j.params)
        if (k == p.name) text = v, found = true;
      double number = NAN;
      if (found && !parse_number(text, number)) p.numeric = false;
      has.push_back(found);
      p.text.push_back(text);
      p.values.push_back(found ? number : NAN);
    }
    if (p.numeric) {
      std::vector<double> present;
      for (double v : p.values)
        if (!std::isnan(v)) present.push_back(v);
      p.log = log_axis(present);
      continue;
    }
    const std::set<std::string> seen = [&] {
      std::set<std::string> s;
      for (size_t i = 0; i < has.size(); ++i)
        if (has[i]) s.insert(p.text[i]);
      return s;
    }();
    p.categories.assign(seen.begin(), seen.end());
    for (size_t i = 0; i < has.size(); ++i)
      p.values[i] = has[i] ? static_cast<double>(std::lower_bound(p.categories.begin(), p.categories.end(), p.text[i]) - p.categories.begin())
                           : NAN;
  }
  return params;
}

// 1-based ranks, ties sharing their average rank.
std::vector<double> ranks(const std::vector<double>& v) {
  std::vector<size_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
    for (size_t k = i; k <= j; ++k) r[order[k]] = (static_cast<double>(i + j) + 2) / 2;
    i = j + 1;
  }
  return r;
}

double mean(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size()); }

double std_dev(const std::vector<double>& v) {  // of the population: these jobs are all there is
  const double m = mean(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size()));
}

double pearson(const std::vector<double>& a, const std::vector<double>& b) {  // NaN when either is constant
  const double ma = mean(a), mb = mean(b);
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) ab += (a[i] - ma) * (b[i] - mb), aa += (a[i] - ma) * (a[i] - ma), bb += (b[i] - mb) * (b[i] - mb);
  return aa > 0 && bb > 0 ? ab / std::sqrt(aa * bb) : NAN;
}

std::string params_text(const ReportJob& j) {
  std::string o;
  for (const auto& [k, v] : j.params) o += (o.empty() ? "" : " ") + k + "=" + v;
  return o;
}

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// A relative path as a URL: every byte but unreserved characters and '/' percent-encoded.
std::string url_path(const std::string& path) {
  std::string o;
  for (unsigned char c : path) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '/') o += static_cast<char>(c);
    else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      o += buf;
    }
  }
  return o;
}

// Sorts a table.sortable by the column whose header is clicked (again: the other way). Cells sort
// by their data-value; columns with data-type='number' numerically, jobs without a value last.
const char* const kSortScript = R"(for (const table of document.querySelectorAll('table.sortable')) {
  const heads = Array.from(table.tHead.rows[0].cells);
  heads.forEach((th, col) => th.addEventListener('click', () => {
    const up = th.getAttribute('aria-sort') !== 'ascending';
    heads.forEach(h => h.removeAttribute('aria-sort'));
    th.setAttribute('aria-sort', up ? 'ascending' : 'descending');
    const numeric = th.dataset.type === 'number', body = table.tBodies[0];
    const key = r => { const c = r.cells[col]; return c.hasAttribute('data-value') ? c.dataset.value : c.textContent; };
    const rows = Array.from(body.rows);
    rows.sort((a, b) => {
      const x = key(a), y = key(b);
      if (x === '' || y === '') return (x === '') - (y === '');
      const d = numeric ? Number(x) - Number(y) : x.localeCompare(y);
      return up ? d : -d;
    });
    for (const r of rows) body.appendChild(r);
  }));
})";

const char* const kCss =
    "#jobs th{cursor:pointer;user-select:none;border-bottom:1px solid #999}#jobs th[aria-sort=ascending]::after{content:' \\25B2'}"
    "#jobs th[aria-sort=descending]::after{content:' \\25BC'}#jobs tr.best{background:#e8ecff}#jobs td.status-failed{color:#c00}"
    ".scatters{display:flex;flex-wrap:wrap;gap:8px}.failure h3{margin-bottom:0}.note{color:#555;font-size:90%}";

}  // namespace

bool log_axis(const std::vector<double>& values, double factor) {
  if (values.empty()) return false;
  double lo = INFINITY, hi = -INFINITY;
  for (double v : values) {
    if (!std::isfinite(v) || v <= 0) return false;
    lo = std::min(lo, v), hi = std::max(hi, v);
  }
  return hi > factor * lo;
}

std::optional<size_t> best_job(const ReportInput& input) {
  std::optional<size_t> best;
  const bool any_done = std::any_of(input.jobs.begin(), input.jobs.end(), [](const ReportJob& j) {
    return j.status == "done" && j.objective && std::isfinite(*j.objective);
  });
  for (size_t i = 0; i < input.jobs.size(); ++i) {
    const ReportJob& j = input.jobs[i];
    if (!j.objective || !std::isfinite(*j.objective) || (any_done && j.status != "done")) continue;
    const double b = best ? *input.jobs[*best].objective : 0;
    if (!best || (input.mode == "max" ? *j.objective > b : *j.objective < b)) best = i;
  }
  return best;
}

std::vector<ParamImportance> parameter_importance(const ReportInput& input) {
  std::vector<ParamImportance> out;
  for (const Param& p : collect_params(input)) {
    ParamImportance imp;
    imp.param = p.name;
    imp.numeric = p.numeric;
    std::vector<double> x, y;  // the jobs with both
    for (size_t i = 0; i < input.jobs.size(); ++i) {
      const auto& o = input.jobs[i].objective;
      if (o && std::isfinite(*o) && !std::isnan(p.values[i])) x.push_back(p.values[i]), y.push_back(*o);
    }
    imp.jobs = x.size();
    if (x.size() >= 3 && p.numeric) {
      imp.value = std::abs(pearson(ranks(x), ranks(y)));
    } else if (x.size() >= 3) {
      std::map<double, std::vector<double>> groups;
      for (size_t i = 0; i < x.size(); ++i) groups[x[i]].push_back(y[i]);
      double lo = INFINITY, hi = -INFINITY;
      for (const auto& [category, objectives] : groups) lo = std::min(lo, mean(objectives)), hi = std::max(hi, mean(objectives));
      const double s = std_dev(y);
      if (groups.size() >= 2 && s > 0) imp.value = (hi - lo) / s;
    }
    out.push_back(imp);
  }
  return out;
}

fs::path write_sweep_report(const ReportInput& input, const fs::path& out_dir) {
  const std::vector<Param> params = collect_params(input);
  const std::optional<size_t> best = best_job(input);
  const bool higher_is_better = input.mode == "max";
  const std::string objective_name = input.objective.empty() ? "objective" : input.objective;
  std::vector<double> objectives;
  for (const ReportJob& j : input.jobs)
    if (j.objective && std::isfinite(*j.objective)) objectives.push_back(*j.objective);
  const bool objective_log = log_axis(objectives);
  // Colours as the parallel coordinates give them: the best end deep blue, on the objective's axis units.
  const double o_lo = objectives.empty() ? 0 : *std::min_element(objectives.begin(), objectives.end()),
               o_hi = objectives.empty() ? 1 : *std::max_element(objectives.begin(), objectives.end());
  auto colour_of = [&](const ReportJob& j) -> std::string {
    if (!j.objective || !std::isfinite(*j.objective)) return "#999";
    auto unit = [&](double v) { return objective_log ? std::log10(v) : v; };
    const double f = o_hi > o_lo ? (unit(*j.objective) - unit(o_lo)) / (unit(o_hi) - unit(o_lo)) : 0.5;
    return plot::colour_scale(higher_is_better ? 1 - f : f);
  };
  auto label_of = [&](const ReportJob& j) {
    return "job " + j.name + (j.params.empty() ? "" : ": " + params_text(j)) +
           (j.objective ? "; " + objective_name + " " + plot::number(*j.objective, 6) : "");
  };

  // The header line: what, the objective, jobs by status, the best.
  std::map<std::string, int> by_status;
  for (const ReportJob& j : input.jobs) ++by_status[j.status];
  std::string counts;
  for (const char* s : {"done", "failed", "interrupted", "stopped", "unfinished", "running", "pending"})
    if (by_status.count(s)) counts += (counts.empty() ? "" : ", ") + std::to_string(by_status[s]) + " " + s;
  for (const auto& [s, n] : by_status)
    if (std::string(" done failed interrupted stopped unfinished running pending ").find(" " + s + " ") == std::string::npos)
      counts += (counts.empty() ? "" : ", ") + std::to_string(n) + " " + plot::escape(s.empty() ? "unknown" : s);
  std::ostringstream intro;
  intro << "<p id='summary'>Jobs in <code>" << plot::escape(input.title) << "</code>; objective "
        << (input.objective.empty() ? "none" : "<b>" + plot::escape(input.objective) + "</b> (" + plot::escape(input.mode) + ")") << "; "
        << input.jobs.size() << " jobs: " << counts << ".";
  if (best) {
    const ReportJob& b = input.jobs[*best];
    intro << " Best: <b id='best-job' data-job='" << plot::escape(b.name) << "'>job " << plot::escape(b.name) << "</b> ("
          << plot::escape(objective_name) << " " << plot::number(*b.objective, 6) << ")"
          << (b.params.empty() ? "" : ": <code>" + plot::escape(params_text(b)) + "</code>") << ".";
  }
  intro << "</p>";

  plot::Page page;
  page.title = "Sweep report";
  page.css = kCss;
  page.intro = intro.str();
  page.script = kSortScript;
  const std::string no_objective = "<p class='note'>No job has a value of the objective" +
                                   (input.objective.empty() ? std::string(" (none was named)") : " " + plot::escape(input.objective)) +
                                   ".</p>";

  // Parallel coordinates: the jobs with an objective.
  {
    std::vector<plot::ParallelAxis> axes;
    for (const Param& p : params) axes.push_back({p.name, p.categories, p.log});
    std::vector<plot::ParallelLine> lines;
    for (size_t i = 0; i < input.jobs.size(); ++i) {
      const ReportJob& j = input.jobs[i];
      if (!j.objective || !std::isfinite(*j.objective)) continue;
      plot::ParallelLine l;
      for (const Param& p : params) l.values.push_back(p.values[i]);
      l.objective = *j.objective, l.id = j.name, l.label = label_of(j), l.highlight = best == i;
      lines.push_back(l);
    }
    plot::ParallelOptions options;
    options.objective_name = objective_name;
    options.objective_log = objective_log;
    options.higher_is_better = higher_is_better;
    page.sections.push_back({"parameters", "Parameters and objective",
                             lines.empty() ? no_objective
                                           : "<p class='note'>One line per job, coloured by " + plot::escape(objective_name) +
                                                 " (deep blue: best); the best job is drawn thicker.</p><div class='chart'>" +
                                                 plot::parallel_coordinates("Parallel coordinates", axes, lines, options) + "</div>"});
  }

  // The objective against each parameter.
  {
    std::string html;
    for (const Param& p : params) {
      std::vector<plot::Point> points;
      for (size_t i = 0; i < input.jobs.size(); ++i) {
        const ReportJob& j = input.jobs[i];
        if (!j.objective || !std::isfinite(*j.objective) || std::isnan(p.values[i])) continue;
        plot::Point pt;
        pt.x = p.values[i], pt.y = *j.objective, pt.colour = colour_of(j), pt.highlight = best == i, pt.label = label_of(j);
        pt.data = {{"job", j.name}};
        points.push_back(pt);
      }
      plot::ScatterOptions options;
      options.x_label = p.name + (p.log ? " (log)" : "");
      options.y_label = objective_name;
      options.log_x = p.log;
      options.log_y = objective_log;
      options.x_categories = p.categories;
      html += "<div class='param-scatter' data-param='" + plot::escape(p.name) + "'>" + plot::scatter_plot(p.name, points, options) + "</div>";
    }
    page.sections.push_back({"scatter", "Objective against each parameter",
                             objectives.empty() ? no_objective
                             : params.empty()   ? "<p class='note'>No parameter differs between the jobs.</p>"
                                                : "<div class='scatters'>" + html + "</div>"});
  }

  // Learning curves: the objective (else the training loss) over steps, the best job last and thicker.
  {
    const std::string metric = input.objective.empty() ? "train/loss" : input.objective;
    std::vector<plot::Series> curves;
    std::vector<double> all_y;
    for (size_t pass = 0; pass < 2; ++pass)
      for (size_t i = 0; i < input.jobs.size(); ++i) {
        if ((best == i) != (pass == 1)) continue;
        const ReportJob& j = input.jobs[i];
        std::map<std::string, plot::Series> metrics = plot::read_metrics_csv(j.run_dir / "metrics.csv");
        if (!metrics.count(metric)) continue;
        plot::Series s = metrics[metric];
        s.name = best == i ? "job " + j.name + " (best)" : "";
        s.colour = colour_of(j);
        s.width = best == i ? 3 : 1.2;
        s.css_class = best == i ? "job best" : "job";
        s.data = {{"job", j.name}};
        all_y.insert(all_y.end(), s.y.begin(), s.y.end());
        curves.push_back(s);
      }
    plot::LineOptions options;
    options.x_label = "step";
    options.y_label = metric;
    options.log_y = log_axis(all_y, 10);
    options.css_class = "plot curves";
    page.sections.push_back(
        {"curves", "Learning curves",
         curves.empty() ? "<p class='note'>No job has " + plot::escape(metric) + " in its metrics.csv.</p>"
                        : "<p class='note'>" + plot::escape(metric) + " of every job over its steps" + (options.log_y ? " (log scale)" : "") +
                              ", coloured as above.</p><div class='chart'>" + plot::line_plot(metric + " per step", curves, options) + "</div>"});
  }

  // The jobs: sortable by any column.
  {
    const fs::path out_abs = normal_path(out_dir);
    const bool numeric_names = std::all_of(input.jobs.begin(), input.jobs.end(), [](const ReportJob& j) {
      double v = 0;
      return parse_number(j.name, v);
    });
    std::ostringstream t;
    t << "<p class='note'>Click a column's header to sort by it.</p><table id='jobs' class='sortable'><thead><tr><th data-type='"
      << (numeric_names ? "number" : "text") << "'>job</th>";
    for (const Param& p : params) t << "<th data-type='" << (p.numeric ? "number" : "text") << "'>" << plot::escape(p.name) << "</th>";
    t << "<th data-type='number' class='objective'>" << plot::escape(objective_name)
      << "</th><th data-type='text'>status</th><th data-type='number'>seconds</th><th data-type='number'>steps</th><th data-type='text'>report</th>"
         "</tr></thead><tbody>";
    for (size_t i = 0; i < input.jobs.size(); ++i) {
      const ReportJob& j = input.jobs[i];
      t << "<tr data-job='" << plot::escape(j.name) << "'" << (best == i ? " class='best'" : "") << "><td data-value='" << plot::escape(j.name)
        << "'>" << plot::escape(j.name) << "</td>";
      for (const Param& p : params) {
        const std::string value = p.numeric && !std::isnan(p.values[i]) ? plot::number(p.values[i], 17) : p.text[i];
        t << "<td data-value='" << plot::escape(value) << "'>" << plot::escape(p.text[i]) << "</td>";
      }
      const bool has_objective = j.objective && std::isfinite(*j.objective);
      t << "<td class='objective' data-value='" << (has_objective ? plot::number(*j.objective, 17) : "") << "'>"
        << (has_objective ? plot::number(*j.objective, 6) : "") << "</td><td class='status-" << plot::escape(j.status) << "'>"
        << plot::escape(j.status) << "</td><td data-value='" << plot::number(j.seconds, 17) << "'>" << fixed(j.seconds, 1)
        << "</td><td data-value='" << j.steps << "'>" << j.steps << "</td><td>";
      const fs::path report = j.run_dir / "report.html";
      if (fs::is_regular_file(report))
        t << "<a href='" << plot::escape(url_path(normal_path(report).lexically_relative(out_abs).generic_string())) << "'>report</a>";
      t << "</td></tr>";
    }
    t << "</tbody></table>";
    page.sections.push_back({"jobs-section", "Jobs", t.str()});
  }

  // Importance per parameter.
  {
    const std::vector<ParamImportance> importance = parameter_importance(input);
    std::ostringstream s;
    s << "<p class='note'>Numeric parameters: the absolute Spearman rank correlation between the parameter and the objective over "
         "the jobs with an objective (1: the objective rises or falls with it throughout, 0: no monotonic relation). Categorical "
         "parameters: the spread (largest minus smallest) of the mean objective per value, divided by the standard deviation of the "
         "objective over those jobs. n/a: fewer than 3 jobs, or the parameter or the objective does not vary.</p>";
    if (importance.empty()) {
      s << "<p class='note'>No parameter differs between the jobs.</p>";
    } else {
      std::vector<std::string> names;
      std::vector<std::vector<double>> values(1);
      for (const ParamImportance& imp : importance) names.push_back(imp.param), values[0].push_back(imp.value);
      s << "<div class='chart'>" << plot::bar_chart("Parameter importance", names, {"importance"}, {"#1f77b4"}, values, "", 2)
        << "</div><table id='importance-table'><thead><tr><th>parameter</th><th>measure</th><th>importance</th><th>jobs</th></tr></thead><tbody>";
      for (const ParamImportance& imp : importance)
        s << "<tr data-param='" << plot::escape(imp.param) << "'><td>" << plot::escape(imp.param) << "</td><td>"
          << (imp.numeric ? "|Spearman &#961;|" : "spread of means / std") << "</td><td class='importance' data-value='"
          << (std::isnan(imp.value) ? "" : plot::number(imp.value, 17)) << "'>"
          << (std::isnan(imp.value) ? "n/a" : plot::number(std::round(imp.value * 1000) / 1000, 3)) << "</td><td>" << imp.jobs << "</td></tr>";
      s << "</tbody></table>";
    }
    page.sections.push_back({"importance", "Parameter importance", s.str()});
  }

  // The jobs that did not finish, with the end of their logs.
  {
    std::ostringstream f;
    for (const ReportJob& j : input.jobs) {
      if (j.status == "done" || j.status == "running" || j.status == "pending") continue;
      f << "<div class='failure' data-job='" << plot::escape(j.name) << "'><h3>job " << plot::escape(j.name) << ": " << plot::escape(j.status)
        << "</h3>" << (j.params.empty() ? "" : "<p><code>" + plot::escape(params_text(j)) + "</code></p>")
        << (j.error_tail.empty() ? "<p class='note'>No log.</p>" : "<pre>" + plot::escape(j.error_tail) + "</pre>") << "</div>";
    }
    if (!f.str().empty()) page.sections.push_back({"failures", "Failed and stopped jobs", f.str()});
  }

  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) throw std::runtime_error("Cannot create '" + out_dir.string() + "': " + ec.message());
  const fs::path path = out_dir / "report.html";
  write_file_atomic(path.string(), plot::render_page(page));
  return path;
}

}  // namespace wavetrain::sweep
