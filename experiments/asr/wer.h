// Word error rate as sclite (NIST's sctk) computes it, and the files icefall writes from it.
//
// Alignment: sclite's dynamic programme over words, with its costs: a substitution costs 4, an
// insertion or a deletion 3, a match 0 (so a substitution is preferred to a deletion plus an
// insertion). Among alignments of equal cost, the path is traced back from the end preferring a
// diagonal step (match or substitution), then an insertion, then a deletion: on 3,000 random
// pairs this reproduced sclite's (#C #S #D #I) for every one. The counts are then sclite's, which
// can differ from the plain Levenshtein split (tests/asr_wer_test.cpp compares with sclite).
// Words compare exactly (sclite -s: case-sensitive).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace wavetrain::experiments::asr {

struct WordErrors {
  int64_t substitutions = 0, deletions = 0, insertions = 0, reference_words = 0;
  int64_t errors() const { return substitutions + deletions + insertions; }
  int64_t correct() const { return reference_words - substitutions - deletions; }
  double rate() const { return reference_words > 0 ? static_cast<double>(errors()) / static_cast<double>(reference_words) : 0.0; }
  WordErrors& operator+=(const WordErrors& o);
};

// One step of an alignment: a reference word against a hypothesis word; -1 on one side is an
// insertion (no reference word) or a deletion (no hypothesis word).
struct AlignedPair {
  int64_t ref = -1, hyp = -1;
};

std::vector<std::string> split_words(const std::string& text);
std::vector<AlignedPair> align_words(const std::vector<std::string>& reference, const std::vector<std::string>& hypothesis);
WordErrors word_errors(const std::vector<std::string>& reference, const std::vector<std::string>& hypothesis);
WordErrors word_errors(const std::string& reference, const std::string& hypothesis);

// One decoded utterance: its id, reference words and hypothesis words.
struct Recognition {
  std::string id;
  std::vector<std::string> ref, hyp;
};

// The errors of a whole set, with what icefall's errs-*.txt lists.
struct ErrorStats {
  WordErrors total;
  std::map<std::pair<std::string, std::string>, int64_t> substitutions;  // (ref, hyp) -> count
  std::map<std::string, int64_t> deletions, insertions;
  // word -> {correct, substituted as ref, substituted as hyp, inserted, deleted}
  std::map<std::string, std::array<int64_t, 5>> words;
};
ErrorStats error_stats(const std::vector<Recognition>& results);

// icefall's recogs-*.txt: per utterance "id:\tref=[...]" and "id:\thyp=[...]", the word lists
// written as Python writes a list of strings.
void write_recogs(std::ostream& out, const std::vector<Recognition>& results);
// icefall's errs-*.txt: "%WER = x.xx", the error counts, then PER-UTT DETAILS (successive errors
// joined: "(a b->c)"), SUBSTITUTIONS, DELETIONS, INSERTIONS and PER-WORD STATS, most frequent first.
void write_errs(std::ostream& out, const std::vector<Recognition>& results, const ErrorStats& stats);
// Kaldi's line: "%WER 5.55 [ 41 / 739, 3 ins, 10 del, 28 sub ]".
std::string kaldi_wer_line(const WordErrors& e);
// A word list as Python's repr() of a list of str writes it: ['a', "don't"].
std::string python_list(const std::vector<std::string>& words);

}  // namespace wavetrain::experiments::asr
