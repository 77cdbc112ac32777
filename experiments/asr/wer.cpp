// Word error rate (wer.h).
#include "experiments/asr/wer.h"

#include <algorithm>
#include <sstream>

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

WordErrors word_errors(const std::vector<std::string>& ref, const std::vector<std::string>& hyp) {
  // cost[i][j]: edits turning ref[0, i) into hyp[0, j); one row at a time, with the operation
  // counts of the chosen path carried along.
  struct Cell {
    int64_t cost = 0, sub = 0, del = 0, ins = 0;
  };
  const size_t R = ref.size(), H = hyp.size();
  std::vector<Cell> prev(H + 1), row(H + 1);
  for (size_t j = 0; j <= H; ++j) prev[j] = {static_cast<int64_t>(j), 0, 0, static_cast<int64_t>(j)};
  for (size_t i = 1; i <= R; ++i) {
    row[0] = {static_cast<int64_t>(i), 0, static_cast<int64_t>(i), 0};
    for (size_t j = 1; j <= H; ++j) {
      const bool same = ref[i - 1] == hyp[j - 1];
      Cell diagonal = prev[j - 1];
      diagonal.cost += same ? 0 : 1;
      diagonal.sub += same ? 0 : 1;
      Cell deletion = prev[j];
      ++deletion.cost;
      ++deletion.del;
      Cell insertion = row[j - 1];
      ++insertion.cost;
      ++insertion.ins;
      Cell best = diagonal;
      if (deletion.cost < best.cost) best = deletion;
      if (insertion.cost < best.cost) best = insertion;
      row[j] = best;
    }
    std::swap(prev, row);
  }
  const Cell& end = prev[H];
  WordErrors e;
  e.substitutions = end.sub;
  e.deletions = end.del;
  e.insertions = end.ins;
  e.reference_words = static_cast<int64_t>(R);
  return e;
}

WordErrors word_errors(const std::string& reference, const std::string& hypothesis) {
  return word_errors(split_words(reference), split_words(hypothesis));
}

}  // namespace wavetrain::experiments::asr
