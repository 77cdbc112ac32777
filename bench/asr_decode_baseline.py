# Baseline for bench/asr_decode.sh: icefall's two CPU decoders written in Python PyTorch from their
# published algorithms, run on the encoder outputs and decoder weights that wavetrain_bench_asr_decode
# saved (OUT.pt), so that both sides decode the same numbers:
#   greedy_search_batch: utterances sorted by length, frame by frame, argmax of the joiner, one
#     symbol per frame, the predictor recomputed for the batch after any emission;
#   modified_beam_search: every hypothesis extended by every token at once (log-softmax plus the
#     hypothesis's score), the top `beam` of each utterance kept, equal sequences merged by
#     log-add; the best by score / length at the end.
# Checks that its hypotheses equal wavetrain's (OUT.greedy.txt, OUT.beam.txt) and prints
# "greedy_ms beam_ms greedy_mismatches beam_mismatches".
# usage: asr_decode_baseline.py OUT [THREADS] [REPEATS] [BEAM]
import sys
import time

import torch
import torch.nn.functional as F

out = sys.argv[1]
threads = int(sys.argv[2]) if len(sys.argv) > 2 else 2
repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 3
beam = int(sys.argv[4]) if len(sys.argv) > 4 else 4
torch.set_num_threads(threads)
torch.set_grad_enabled(False)

saved = torch.load(out + ".pt")
blank, unk, context = 0, int(saved["unk_id"]), int(saved["context_size"])
embedding = saved["predictor.embedding.weight"]
conv = saved.get("predictor.conv.weight")
enc_w, enc_b = saved["joiner.encoder_proj.weight"], saved["joiner.encoder_proj.bias"]
pred_w, pred_b = saved["joiner.predictor_proj.weight"], saved["joiner.predictor_proj.bias"]
out_w, out_b = saved["joiner.output.weight"], saved["joiner.output.bias"]
batches = []
b = 0
while f"batch{b}.encoder_out" in saved:
    batches.append((saved[f"batch{b}.encoder_out"], saved[f"batch{b}.lengths"]))
    b += 1


def decoder(contexts):  # int64 [N][context] -> projected predictor output [N][J]
    e = F.embedding(contexts, embedding)  # blank's row is zero (padding_idx)
    if conv is not None:
        e = F.conv1d(e.transpose(1, 2), conv, groups=conv.shape[0] // conv.shape[1]).transpose(1, 2)
    return F.linear(F.relu(e[:, -1]), pred_w, pred_b)


def joiner(enc_projected, dec_projected):
    return F.linear(torch.tanh(enc_projected + dec_projected), out_w, out_b)


def greedy_search_batch(encoder_out, lengths):
    order = sorted(range(len(lengths)), key=lambda i: -int(lengths[i]))
    enc = F.linear(encoder_out[order], enc_w, enc_b)
    lens = [int(lengths[i]) for i in order]
    hyps = [[blank] * context for _ in order]
    dec = decoder(torch.tensor([h[-context:] for h in hyps]))
    for t in range(max(lens)):
        active = sum(1 for n in lens if n > t)
        dec = dec[:active]
        y = joiner(enc[:active, t], dec).argmax(dim=-1).tolist()
        emitted = False
        for i, v in enumerate(y):
            if v != blank and v != unk:
                hyps[i].append(v)
                emitted = True
        if emitted:
            dec = decoder(torch.tensor([h[-context:] for h in hyps[:active]]))
    result = [None] * len(order)
    for k, i in enumerate(order):
        result[i] = hyps[k][context:]
    return result


def modified_beam_search(encoder_out, lengths, beam):
    enc = F.linear(encoder_out, enc_w, enc_b)
    n = enc.shape[0]
    # per utterance: {token sequence (with the blank context): log-probability (a 0-d tensor)}
    beams = [{tuple([blank] * context): torch.zeros(())} for _ in range(n)]
    for t in range(enc.shape[1]):
        active = [i for i in range(n) if int(lengths[i]) > t]
        if not active:
            break
        hyps = [(i, ys, lp) for i in active for ys, lp in beams[i].items()]
        dec = decoder(torch.tensor([list(ys[-context:]) for _, ys, _ in hyps]))
        rows = torch.tensor([i for i, _, _ in hyps])
        log_probs = joiner(enc[rows, t], dec).log_softmax(dim=-1)
        log_probs = log_probs + torch.stack([lp for _, _, lp in hyps]).unsqueeze(1)
        vocab = log_probs.shape[1]
        start = 0
        for i in active:
            count = len(beams[i])
            flat = log_probs[start:start + count].reshape(-1)
            top_values, top_indexes = flat.topk(min(beam, flat.numel()))
            merged = {}
            for value, index in zip(top_values, top_indexes.tolist()):
                _, ys, _ = hyps[start + index // vocab]
                token = index % vocab
                if token != blank and token != unk:
                    ys = ys + (token,)
                merged[ys] = torch.logaddexp(merged[ys], value) if ys in merged else value
            beams[i] = merged
            start += count
    return [list(max(b.items(), key=lambda kv: float(kv[1]) / len(kv[0]))[0][context:]) for b in beams]


def run(method):
    return [h for enc, lens in batches for h in method(enc, lens)]


def mismatches(hyps, path):
    ours = [[int(x) for x in line.split()] for line in open(path)]
    return sum(1 for a, b in zip(hyps, ours) if a != b) + abs(len(hyps) - len(ours))


times = {"greedy": [], "beam": []}
found = {}
for _ in range(repeats):
    for name, method in (("greedy", greedy_search_batch), ("beam", lambda e, l: modified_beam_search(e, l, beam))):
        t = time.perf_counter()
        found[name] = run(method)
        times[name].append((time.perf_counter() - t) * 1000)
median = lambda v: sorted(v)[len(v) // 2]
print(f"{median(times['greedy']):.1f} {median(times['beam']):.1f} "
      f"{mismatches(found['greedy'], out + '.greedy.txt')} {mismatches(found['beam'], out + '.beam.txt')}")
