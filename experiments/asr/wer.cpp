// Word error rate and icefall's result files (wer.h).
#include "experiments/asr/wer.h"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <tuple>

namespace wavetrain::experiments::asr {

WordErrors& WordErrors::operator+=(const WordErrors& o) {
  substitutions += o.substitutions;
  deletions += o.deletions;
  insertions += o.insertions;
  reference_words += o.reference_words;
  return *this;
}

std::vector<std::string> split_words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

std::vector<AlignedPair> align_words(const std::vector<std::string>& ref, const std::vector<std::string>& hyp) {
  constexpr int64_t kSub = 4, kInsDel = 3;  // sclite's costs
  const size_t R = ref.size(), H = hyp.size(), W = H + 1;
  // cost[i * W + j]: the cheapest alignment of ref[0, i) with hyp[0, j).
  std::vector<int64_t> cost((R + 1) * W);
  for (size_t i = 0; i <= R; ++i)
    for (size_t j = 0; j <= H; ++j) {
      int64_t best = (i + j) * kInsDel;  // all deletions and insertions
      if (i > 0) best = std::min(best, cost[(i - 1) * W + j] + kInsDel);
      if (j > 0) best = std::min(best, cost[i * W + j - 1] + kInsDel);
      if (i > 0 && j > 0) best = std::min(best, cost[(i - 1) * W + j - 1] + (ref[i - 1] == hyp[j - 1] ? 0 : kSub));
      cost[i * W + j] = best;
    }
  // Back from the end: diagonal, then insertion, then deletion, among the steps that keep the cost.
  std::vector<AlignedPair> path;
  size_t i = R, j = H;
  while (i > 0 || j > 0) {
    const int64_t here = cost[i * W + j];
    if (i > 0 && j > 0 && here == cost[(i - 1) * W + j - 1] + (ref[i - 1] == hyp[j - 1] ? 0 : kSub)) {
      path.push_back({static_cast<int64_t>(--i), static_cast<int64_t>(--j)});
    } else if (j > 0 && here == cost[i * W + j - 1] + kInsDel) {
      path.push_back({-1, static_cast<int64_t>(--j)});
    } else {
      path.push_back({static_cast<int64_t>(--i), -1});
    }
  }
  std::reverse(path.begin(), path.end());
  return path;
}

WordErrors word_errors(const std::vector<std::string>& ref, const std::vector<std::string>& hyp) {
  WordErrors e;
  e.reference_words = static_cast<int64_t>(ref.size());
  for (const AlignedPair& p : align_words(ref, hyp)) {
    if (p.ref < 0) ++e.insertions;
    else if (p.hyp < 0) ++e.deletions;
    else if (ref[static_cast<size_t>(p.ref)] != hyp[static_cast<size_t>(p.hyp)]) ++e.substitutions;
  }
  return e;
}

WordErrors word_errors(const std::string& reference, const std::string& hypothesis) {
  return word_errors(split_words(reference), split_words(hypothesis));
}

ErrorStats error_stats(const std::vector<Recognition>& results) {
  ErrorStats s;
  for (const Recognition& r : results) {
    s.total.reference_words += static_cast<int64_t>(r.ref.size());
    for (const AlignedPair& p : align_words(r.ref, r.hyp)) {
      if (p.ref < 0) {
        const std::string& w = r.hyp[static_cast<size_t>(p.hyp)];
        ++s.total.insertions, ++s.insertions[w], ++s.words[w][3];
      } else if (p.hyp < 0) {
        const std::string& w = r.ref[static_cast<size_t>(p.ref)];
        ++s.total.deletions, ++s.deletions[w], ++s.words[w][4];
      } else {
        const std::string &a = r.ref[static_cast<size_t>(p.ref)], &b = r.hyp[static_cast<size_t>(p.hyp)];
        if (a == b) {
          ++s.words[a][0];
        } else {
          ++s.total.substitutions, ++s.substitutions[{a, b}], ++s.words[a][1], ++s.words[b][2];
        }
      }
    }
  }
  return s;
}

std::string python_list(const std::vector<std::string>& words) {
  std::string out = "[";
  for (size_t k = 0; k < words.size(); ++k) {
    const std::string& w = words[k];
    // Python quotes with ' unless the string holds a ' and no ".
    const char quote = w.find('\'') != std::string::npos && w.find('"') == std::string::npos ? '"' : '\'';
    if (k > 0) out += ", ";
    out += quote;
    for (const unsigned char c : w) {
      if (c == '\\') out += "\\\\";
      else if (c == static_cast<unsigned char>(quote)) out += std::string("\\") + quote;
      else if (c == '\n') out += "\\n";
      else if (c == '\r') out += "\\r";
      else if (c == '\t') out += "\\t";
      else if (c < 0x20 || c == 0x7f) {
        char hex[8];
        std::snprintf(hex, sizeof hex, "\\x%02x", c);
        out += hex;
      } else {
        out += static_cast<char>(c);
      }
    }
    out += quote;
  }
  return out + "]";
}

void write_recogs(std::ostream& out, const std::vector<Recognition>& results) {
  for (const Recognition& r : results) {
    out << r.id << ":\tref=" << python_list(r.ref) << "\n";
    out << r.id << ":\thyp=" << python_list(r.hyp) << "\n";
  }
}

namespace {

std::string percent(int64_t errors, int64_t words) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", words > 0 ? 100.0 * static_cast<double>(errors) / static_cast<double>(words) : 0.0);
  return text;
}

std::string joined(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : " ") + w;
  return out.empty() ? "*" : out;
}

// Sorted as Python's sorted(..., reverse=True) sorts (count, key) tuples: count, then key, both descending.
template <typename Key>
std::vector<std::pair<int64_t, Key>> most_frequent(const std::map<Key, int64_t>& counts) {
  std::vector<std::pair<int64_t, Key>> v;
  for (const auto& [k, n] : counts) v.emplace_back(n, k);
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a > b; });
  return v;
}

}  // namespace

void write_errs(std::ostream& out, const std::vector<Recognition>& results, const ErrorStats& stats) {
  const WordErrors& e = stats.total;
  out << "%WER = " << percent(e.errors(), e.reference_words) << "\n";
  out << "Errors: " << e.insertions << " insertions, " << e.deletions << " deletions, " << e.substitutions << " substitutions, over "
      << e.reference_words << " reference words (" << e.correct() << " correct)\n";
  out << "Search below for sections starting with PER-UTT DETAILS:, SUBSTITUTIONS:, DELETIONS:, INSERTIONS:, PER-WORD STATS:\n\n";
  out << "PER-UTT DETAILS: corr or (ref->hyp)  \n";
  for (const Recognition& r : results) {
    // Successive errors are shown as one: (ref words->hyp words), "*" for none.
    std::vector<std::string> parts, ref_run, hyp_run;
    const auto flush = [&] {
      if (!ref_run.empty() || !hyp_run.empty()) parts.push_back("(" + joined(ref_run) + "->" + joined(hyp_run) + ")");
      ref_run.clear();
      hyp_run.clear();
    };
    for (const AlignedPair& p : align_words(r.ref, r.hyp)) {
      const bool match = p.ref >= 0 && p.hyp >= 0 && r.ref[static_cast<size_t>(p.ref)] == r.hyp[static_cast<size_t>(p.hyp)];
      if (match) {
        flush();
        parts.push_back(r.ref[static_cast<size_t>(p.ref)]);
        continue;
      }
      if (p.ref >= 0) ref_run.push_back(r.ref[static_cast<size_t>(p.ref)]);
      if (p.hyp >= 0) hyp_run.push_back(r.hyp[static_cast<size_t>(p.hyp)]);
    }
    flush();
    std::string line;
    for (const std::string& part : parts) line += (line.empty() ? "" : " ") + part;
    out << r.id << ":\t" << line << "\n";
  }
  out << "\nSUBSTITUTIONS: count ref -> hyp\n";
  for (const auto& [n, pair] : most_frequent(stats.substitutions)) out << n << "   " << pair.first << " -> " << pair.second << "\n";
  out << "\nDELETIONS: count ref\n";
  for (const auto& [n, w] : most_frequent(stats.deletions)) out << n << "   " << w << "\n";
  out << "\nINSERTIONS: count hyp\n";
  for (const auto& [n, w] : most_frequent(stats.insertions)) out << n << "   " << w << "\n";
  out << "\nPER-WORD STATS: word  corr tot_errs count_in_ref count_in_hyp\n";
  std::vector<std::tuple<int64_t, std::string, std::array<int64_t, 5>>> rows;
  for (const auto& [w, c] : stats.words) rows.emplace_back(c[1] + c[2] + c[3] + c[4], w, c);
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a > b; });
  for (const auto& [errors, w, c] : rows)
    out << w << "   " << c[0] << " " << errors << " " << c[0] + c[1] + c[4] << " " << c[0] + c[2] + c[3] << "\n";
}

std::string kaldi_wer_line(const WordErrors& e) {
  return "%WER " + percent(e.errors(), e.reference_words) + " [ " + std::to_string(e.errors()) + " / " + std::to_string(e.reference_words) +
         ", " + std::to_string(e.insertions) + " ins, " + std::to_string(e.deletions) + " del, " + std::to_string(e.substitutions) + " sub ]";
}

}  // namespace wavetrain::experiments::asr
