// Decoding speed of a trained ASR run (experiments/asr/decode.h) on one split of its store, for
// bench/asr_decode.sh: the split's features and encoder outputs are computed once (batches of 16
// utterances of similar length), then greedy search and modified beam search are timed over all
// of them (median of REPEATS). End to end (features, encoder and search) is timed too.
// Writes OUT.pt (the encoder outputs and lengths per batch, and the predictor's and joiner's
// weights, for the Python baseline to decode the same numbers) and OUT.greedy.txt, OUT.beam.txt
// (each utterance's tokens, one line each, in batch order) for the baseline to compare with.
// Prints "audio_s greedy_search_ms beam_search_ms greedy_e2e_ms beam_e2e_ms".
// usage: wavetrain_bench_asr_decode RUN STORE SPLIT OUT [THREADS] [REPEATS] [BEAM]
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "data/hdf5_store.h"
#include "bench/timing.h"
#include "experiments/asr/decode.h"
#include "experiments/asr/transcribe.h"
#include "trainer/serialization/torch_file.h"
#include "trainer/weights.h"

namespace asr = wavetrain::experiments::asr;

using wavetrain::bench::median;
using wavetrain::bench::since;

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s RUN STORE SPLIT OUT [THREADS] [REPEATS] [BEAM]\n", argv[0]);
    return 2;
  }
  const std::string run = argv[1], store_path = argv[2], split = argv[3], out = argv[4];
  const int threads = argc > 5 ? std::atoi(argv[5]) : 2, repeats = argc > 6 ? std::atoi(argv[6]) : 3, beam = argc > 7 ? std::atoi(argv[7]) : 4;
  at::set_num_threads(threads);
  at::NoGradGuard no_grad;
  asr::Recognizer recognizer(run, "", at::kCPU);
  recognizer.model().eval();
  const wavetrain::data::DatasetReader store(store_path);
  const int64_t n = store.size(split);
  std::vector<at::Tensor> audio;
  double seconds = 0;
  for (int64_t i = 0; i < n; ++i) {
    audio.push_back(store.field(split, "audio", i));
    seconds += static_cast<double>(audio.back().numel()) / 16000;
  }
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return audio[static_cast<size_t>(a)].numel() < audio[static_cast<size_t>(b)].numel(); });
  std::vector<std::vector<at::Tensor>> batches;
  for (int64_t first = 0; first < n; first += 16) {
    batches.emplace_back();
    for (int64_t k = first; k < std::min(n, first + 16); ++k) batches.back().push_back(audio[static_cast<size_t>(order[static_cast<size_t>(k)])]);
  }
  const int unk = recognizer.tokenizer().unk_id();

  // End to end, and the encoder outputs the searches are timed on.
  std::vector<std::pair<at::Tensor, at::Tensor>> encoded;
  std::vector<double> e2e[2];
  for (int r = 0; r < repeats; ++r)
    for (int method = 0; method < 2; ++method) {
      const auto t = std::chrono::steady_clock::now();
      for (const auto& b : batches) {
        const auto [input, lengths] = recognizer.features(b);
        const at::Tensor enc = recognizer.model().encoder->forward(input, lengths).first;
        const at::Tensor frames = asr::subsampled_frames(lengths);
        if (method == 0) asr::greedy_search(recognizer.model(), enc, frames, 1, unk);
        else asr::modified_beam_search(recognizer.model(), enc, frames, beam, unk);
        if (r == 0 && method == 0) encoded.emplace_back(enc, frames);
      }
      e2e[method].push_back(since(t));
    }

  std::vector<double> search[2];
  std::vector<std::vector<asr::Hypothesis>> found[2];
  for (int r = 0; r < repeats; ++r)
    for (int method = 0; method < 2; ++method) {
      std::vector<std::vector<asr::Hypothesis>> hyps;
      const auto t = std::chrono::steady_clock::now();
      for (const auto& [enc, frames] : encoded)
        hyps.push_back(method == 0 ? asr::greedy_search(recognizer.model(), enc, frames, 1, unk)
                                   : asr::modified_beam_search(recognizer.model(), enc, frames, beam, unk));
      search[method].push_back(since(t));
      found[method] = std::move(hyps);
    }

  // For the Python baseline: the same encoder outputs and the decoder's weights, and our tokens.
  wavetrain::serialization::StateDict sd;
  for (size_t b = 0; b < encoded.size(); ++b) {
    sd.emplace_back("batch" + std::to_string(b) + ".encoder_out", encoded[b].first.contiguous());
    sd.emplace_back("batch" + std::to_string(b) + ".lengths", encoded[b].second.contiguous());
  }
  for (const auto& [name, t] : wavetrain::module_state_dict(recognizer.model()))
    if (name.rfind("predictor.", 0) == 0 || name.rfind("joiner.", 0) == 0) sd.emplace_back(name, t);
  sd.emplace_back("unk_id", at::tensor(static_cast<int64_t>(unk)));
  sd.emplace_back("context_size", at::tensor(recognizer.model().predictor->context_size()));
  wavetrain::serialization::save_torch_file(out + ".pt", wavetrain::serialization::from_state_dict(sd));
  for (int method = 0; method < 2; ++method) {
    std::ofstream f(out + (method == 0 ? ".greedy.txt" : ".beam.txt"));
    for (const auto& batch : found[method])
      for (const asr::Hypothesis& h : batch) {
        for (size_t k = 0; k < h.tokens.size(); ++k) f << (k ? " " : "") << h.tokens[k];
        f << "\n";
      }
  }
  std::printf("%.1f %.1f %.1f %.1f %.1f\n", seconds, median(search[0]), median(search[1]), median(e2e[0]), median(e2e[1]));
  return 0;
}
