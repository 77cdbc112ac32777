// Decoding a transducer's encoder output into token sequences.
//
// Greedy search, batched (icefall's greedy_search_batch): frame by frame, every utterance of the
// batch at once, the joiner's best token; a non-blank token is emitted, becomes the predictor's
// newest context, and the same frame is tried again, up to max_symbols_per_frame tokens (icefall's
// default 1); a blank moves on to the next frame. Frames past an utterance's length emit nothing.
#pragma once

#include <ATen/ATen.h>

#include <vector>

#include "experiments/asr/transducer.h"

namespace wavetrain::experiments::asr {

// encoder_out [B][T][d], lengths int64 [B] (frames of encoder_out). Runs without gradients.
std::vector<std::vector<int>> greedy_search(TransducerImpl& model, const at::Tensor& encoder_out, const at::Tensor& lengths,
                                            int max_symbols_per_frame = 1);

}  // namespace wavetrain::experiments::asr
