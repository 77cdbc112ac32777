// The built-in sentence generator of the synthetic speech corpus: assistant-style commands and
// statements about times, dates, numbers, names and places, drawn from templates with a seeded
// generator. Every sentence is already what a speaker says and what the transcript holds: lower
// case words of a-z and the apostrophe, numbers spelled out ("twenty one", "the fourth of june",
// "half past seven"), single spaces. So the synthesiser reads exactly the transcript, and no text
// normaliser stands between them.
//
// The vocabulary is the union of the word lists (734 words); vocabulary() lists it.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace wavetrain::experiments::asr {

// "zero" .. "nine hundred ninety nine" (0 <= n < 1000).
std::string spell_number(int n);
// "first" .. "thirty first" (1 <= n <= 31).
std::string spell_ordinal(int n);

class SentenceGenerator {
 public:
  explicit SentenceGenerator(uint64_t seed);
  std::string next();

  // Every word a sentence can contain, sorted, without duplicates.
  static std::vector<std::string> vocabulary();

 private:
  std::mt19937_64 rng_;
};

// A line of a user's sentence file in transcript form: lower case; characters other than a-z, the
// apostrophe and space become spaces; spaces collapsed. A digit sets *has_digit and the caller
// refuses the line, since how "1984" is read is the user's choice. "" for a line without words.
std::string normalize_transcript(const std::string& line, bool* has_digit = nullptr);

}  // namespace wavetrain::experiments::asr
