// Word error rate: the minimum number of substitutions, deletions and insertions that turn the
// reference word sequence into the hypothesis (Levenshtein over words), over the reference's words.
// Among alignments of equal cost, the split into substitutions, deletions and insertions prefers
// substitutions, then deletions; the total is the same whichever is chosen.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace wavetrain::experiments::asr {

struct WordErrors {
  int64_t substitutions = 0, deletions = 0, insertions = 0, reference_words = 0;
  int64_t errors() const { return substitutions + deletions + insertions; }
  double rate() const { return reference_words > 0 ? static_cast<double>(errors()) / static_cast<double>(reference_words) : 0.0; }
  WordErrors& operator+=(const WordErrors& o);
};

std::vector<std::string> split_words(const std::string& text);
WordErrors word_errors(const std::vector<std::string>& reference, const std::vector<std::string>& hypothesis);
WordErrors word_errors(const std::string& reference, const std::string& hypothesis);

}  // namespace wavetrain::experiments::asr
