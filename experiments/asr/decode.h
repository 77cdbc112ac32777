// Decoding a transducer's encoder output into token sequences, batched over utterances.
//
// Greedy search (icefall's greedy_search_batch): frame by frame, every utterance of the batch at
// once, the joiner's best token; a token other than blank and <unk> is emitted, becomes the
// predictor's newest context, and the same frame is tried again, up to max_symbols_per_frame
// tokens (icefall's default 1); blank moves on to the next frame.
//
// Modified beam search (icefall's modified_beam_search): each utterance keeps up to `beam`
// hypotheses, each a token sequence with a log-probability. At frame t every hypothesis is
// extended by every token of the vocabulary at once (the joiner's log-softmax added to the
// hypothesis's score); the `beam` best extensions over all of the utterance's hypotheses survive.
// An extension by blank (or <unk>) keeps the sequence; any other adds the token, so a hypothesis
// gains at most one token per frame. Survivors with the same token sequence are merged, their
// probabilities added (log-add). At the end the hypothesis with the best score per token of
// context + sequence (icefall's length_norm) wins. Beam 1 is greedy search with one symbol per frame.
//
// Invariants: encoder_out [B][T][encoder dim] with lengths int64 [B] <= T; frames t >= lengths[b]
// are padding and are never looked at. The stateless predictor's output depends on the last
// context_size tokens only (blank-padded at the start), so it is computed once per distinct context
// and cached for the whole batch. Runs without gradients, on the encoder output's device; the
// per-hypothesis bookkeeping is on the CPU.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "experiments/asr/transducer.h"

namespace wavetrain::experiments::asr {

struct Hypothesis {
  std::vector<int> tokens;
  std::vector<int> frames;  // the encoder frame each token was emitted at
  double log_prob = 0;      // modified beam search's score (greedy search: 0)
};

struct DecodingOptions {
  std::string method = "greedy_search";  // or "modified_beam_search"
  int beam = 4;
  int max_symbols_per_frame = 1;
  int unk_id = -1;  // a token decoding never emits (icefall's <unk>); -1: none
  void validate() const;  // throws std::invalid_argument naming the decoding.* key
  // The method and the one setting that changes its output, as icefall's decode.py puts them in its
  // file names: "greedy_search-max-sym-per-frame-2", "modified_beam_search-beam-size-4". Evaluations
  // with different settings are written to different files, not over each other.
  std::string settings_label() const;
};

std::vector<Hypothesis> greedy_search(TransducerImpl& model, const at::Tensor& encoder_out, const at::Tensor& lengths,
                                      int max_symbols_per_frame = 1, int unk_id = -1);

std::vector<Hypothesis> modified_beam_search(TransducerImpl& model, const at::Tensor& encoder_out, const at::Tensor& lengths,
                                             int beam = 4, int unk_id = -1);

// The method options.method names.
std::vector<Hypothesis> decode(TransducerImpl& model, const at::Tensor& encoder_out, const at::Tensor& lengths,
                               const DecodingOptions& options);

}  // namespace wavetrain::experiments::asr
