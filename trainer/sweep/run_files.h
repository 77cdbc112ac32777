// What a sweep reads back from its jobs' files: a run's result.json as flat numbers, the objective
// in them, the latest value of a metric in metrics.csv (written as the run goes), the end of a log,
// and the key and value of an override. The multirun driver and the sweep report share these.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace wavetrain::sweep {

// result.json's numbers as flat keys ("best.val/mse": 0.01); empty when the file is missing or cut short.
nlohmann::json read_result_metrics(const std::filesystem::path& result_json);

// The objective in flat metrics: "best.<objective>" (at the best checkpoint), then "last.<objective>",
// then "<objective>". nullopt when none is a number, or `objective` is empty.
std::optional<double> objective_from(const nlohmann::json& flat, const std::string& objective);

// The latest value of column `metric` in a metrics.csv; nullopt if it has none. A half-written last
// row is passed over.
std::optional<double> latest_metric(const std::filesystem::path& metrics_csv, const std::string& metric);

// The last `lines` lines of a file, each ending in a newline; "" when the file is not there.
std::string log_tail(const std::filesystem::path& file, int lines);

// `p` absolute and normal, without a trailing separator ("runs/a/" and "./runs/a" are one path).
std::filesystem::path normal_path(const std::filesystem::path& p);

// "++optimizer.lr=0.001" -> ("optimizer.lr", "0.001"); nullopt for a bare `~key` or a word without '='.
std::optional<std::pair<std::string, std::string>> override_key_value(const std::string& override_text);

}  // namespace wavetrain::sweep
