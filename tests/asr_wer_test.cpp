// Word error rate (experiments/asr/wer.h) against Debian's sctk (sclite), and icefall's files.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <sstream>

#include "experiments/asr/wer.h"
#include "tests/run_process.h"

namespace wavetrain {
namespace {

namespace asr = experiments::asr;
namespace fs = std::filesystem;

// sclite's per-utterance (#C #S #D #I) from its alignment dump, by utterance id.
std::map<std::string, std::array<int64_t, 4>> sclite_scores(const std::vector<asr::Recognition>& results) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("sclite_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream ref(dir / "ref.trn"), hyp(dir / "hyp.trn");
  auto line = [](const std::vector<std::string>& words, const std::string& id) {
    std::string s;
    for (const std::string& w : words) s += w + " ";
    return s + "(" + id + ")\n";
  };
  for (const asr::Recognition& r : results) {
    ref << line(r.ref, r.id);
    hyp << line(r.hyp, r.id);
  }
  ref.close();
  hyp.close();
  // -s: case-sensitive, as wavetrain compares words; -i spu_id: ids are speaker_utterance.
  const testing::ProcessResult p = testing::run_shell("sctk sclite -r '" + (dir / "ref.trn").string() + "' trn -h '" +
                                                      (dir / "hyp.trn").string() + "' trn -i spu_id -s -o pralign stdout");
  EXPECT_EQ(p.exit_code, 0) << p.err;
  std::map<std::string, std::array<int64_t, 4>> out;
  const std::regex id_line(R"(^id: \((.*)\)$)"), scores(R"(^Scores: \(#C #S #D #I\) (\d+) (\d+) (\d+) (\d+)$)");
  std::istringstream in(p.out);
  std::string id;
  std::smatch m;
  for (std::string l; std::getline(in, l);) {
    if (std::regex_match(l, m, id_line)) id = m[1];
    else if (std::regex_match(l, m, scores)) out[id] = {std::stoll(m[1]), std::stoll(m[2]), std::stoll(m[3]), std::stoll(m[4])};
  }
  fs::remove_all(dir);
  return out;
}

// Random word sequences over a small vocabulary (so that alignments have many equal-cost
// choices), mixed case and apostrophes, plus empty references and hypotheses: every count equals
// sclite's, utterance by utterance and in total.
TEST(AsrWer, CountsEqualSclites) {
  const std::vector<std::string> vocabulary = {"a", "b", "c", "A", "it's", "don't", "set", "seven", "x"};
  std::mt19937 rng(5);
  std::vector<asr::Recognition> results;
  auto words = [&](int max) {
    std::vector<std::string> w(std::uniform_int_distribution<int>(0, max)(rng));
    for (std::string& x : w) x = vocabulary[rng() % vocabulary.size()];
    return w;
  };
  for (int i = 0; i < 600; ++i) {
    char id[32];
    std::snprintf(id, sizeof id, "spk_u%04d", i);
    asr::Recognition r{id, words(i < 300 ? 5 : 14), words(i < 300 ? 5 : 14)};
    if (i % 50 == 0) r.ref.clear();
    if (i % 50 == 1) r.hyp.clear();
    if (i % 50 == 2) r.hyp = r.ref;
    results.push_back(r);
  }
  results.push_back({"spk_empty", {}, {}});
  const auto sclite = sclite_scores(results);
  ASSERT_EQ(sclite.size(), results.size());
  asr::WordErrors total;
  std::array<int64_t, 4> sclite_total{};
  for (const asr::Recognition& r : results) {
    const asr::WordErrors e = asr::word_errors(r.ref, r.hyp);
    const std::array<int64_t, 4> ours = {e.correct(), e.substitutions, e.deletions, e.insertions};
    EXPECT_EQ(ours, sclite.at(r.id)) << r.id;
    total += e;
    for (int k = 0; k < 4; ++k) sclite_total[static_cast<size_t>(k)] += sclite.at(r.id)[static_cast<size_t>(k)];
  }
  const asr::ErrorStats stats = asr::error_stats(results);
  EXPECT_EQ(stats.total.substitutions, sclite_total[1]);
  EXPECT_EQ(stats.total.deletions, sclite_total[2]);
  EXPECT_EQ(stats.total.insertions, sclite_total[3]);
  EXPECT_EQ(stats.total.correct(), sclite_total[0]);
  EXPECT_EQ(total.errors(), stats.total.errors());
}

// sclite's costs (substitution 4, insertion and deletion 3) decide between alignments that plain
// edit distance counts as equal, and may even count more errors: 3 substitutions cost 12, as do
// 2 deletions plus 2 insertions.
TEST(AsrWer, SclitesCostsNotPlainEditDistance) {
  asr::WordErrors e = asr::word_errors(std::vector<std::string>{"a", "b"}, {"b", "c"});
  EXPECT_EQ(e.substitutions, 0);  // a deleted, c inserted (6) rather than two substitutions (8)
  EXPECT_EQ(e.deletions, 1);
  EXPECT_EQ(e.insertions, 1);
  e = asr::word_errors("set an alarm for seven", "set the alarm seven");
  EXPECT_EQ(e.substitutions, 1);
  EXPECT_EQ(e.deletions, 1);
  EXPECT_EQ(e.reference_words, 5);
  EXPECT_DOUBLE_EQ(e.rate(), 0.4);
  EXPECT_EQ(asr::kaldi_wer_line(e), "%WER 40.00 [ 2 / 5, 0 ins, 1 del, 1 sub ]");
}

std::vector<asr::Recognition> example() {
  return {{"u1", asr::split_words("set an alarm for seven"), asr::split_words("set the alarm seven")},
          {"u2", {"call", "john"}, {}},
          {"u3", {}, {"hello", "there"}},
          {"u4", {"it's", "on"}, {"it's", "on"}}};
}

// The files in icefall's layout, byte for byte, on an example worked out by hand.
TEST(AsrWer, IcefallsRecogsAndErrsFiles) {
  const std::vector<asr::Recognition> results = example();
  std::ostringstream recogs, errs;
  asr::write_recogs(recogs, results);
  EXPECT_EQ(recogs.str(),
            "u1:\tref=['set', 'an', 'alarm', 'for', 'seven']\n"
            "u1:\thyp=['set', 'the', 'alarm', 'seven']\n"
            "u2:\tref=['call', 'john']\n"
            "u2:\thyp=[]\n"
            "u3:\tref=[]\n"
            "u3:\thyp=['hello', 'there']\n"
            "u4:\tref=[\"it's\", 'on']\n"
            "u4:\thyp=[\"it's\", 'on']\n");
  const asr::ErrorStats stats = asr::error_stats(results);
  asr::write_errs(errs, results, stats);
  EXPECT_EQ(errs.str(),
            "%WER = 66.67\n"
            "Errors: 2 insertions, 3 deletions, 1 substitutions, over 9 reference words (5 correct)\n"
            "Search below for sections starting with PER-UTT DETAILS:, SUBSTITUTIONS:, DELETIONS:, INSERTIONS:, PER-WORD STATS:\n"
            "\n"
            "PER-UTT DETAILS: corr or (ref->hyp)  \n"
            "u1:\tset (an->the) alarm (for->*) seven\n"
            "u2:\t(call john->*)\n"
            "u3:\t(*->hello there)\n"
            "u4:\tit's on\n"
            "\n"
            "SUBSTITUTIONS: count ref -> hyp\n"
            "1   an -> the\n"
            "\n"
            "DELETIONS: count ref\n"
            "1   john\n"
            "1   for\n"
            "1   call\n"
            "\n"
            "INSERTIONS: count hyp\n"
            "1   there\n"
            "1   hello\n"
            "\n"
            "PER-WORD STATS: word  corr tot_errs count_in_ref count_in_hyp\n"
            "there   0 1 0 1\n"
            "the   0 1 0 1\n"
            "john   0 1 1 0\n"
            "hello   0 1 0 1\n"
            "for   0 1 1 0\n"
            "call   0 1 1 0\n"
            "an   0 1 1 0\n"
            "seven   1 0 1 1\n"
            "set   1 0 1 1\n"
            "on   1 0 1 1\n"
            "it's   1 0 1 1\n"
            "alarm   1 0 1 1\n");
  EXPECT_EQ(asr::kaldi_wer_line(stats.total), "%WER 66.67 [ 6 / 9, 2 ins, 3 del, 1 sub ]");
  EXPECT_EQ(asr::python_list({"a\\b", "say \"hi\"", "it's \"x\"", "\t"}), R"(['a\\b', 'say "hi"', 'it\'s "x"', '\t'])");
}

}  // namespace
}  // namespace wavetrain
