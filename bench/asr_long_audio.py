# Long audio through `wavetrain transcribe` (issue 17): test utterances are joined end to end into
# long files (pauses of 0.3-0.8 s between them), transcribed whole (cut into pieces at pauses), and
# scored against the joined references with sclite. The baseline is the same utterances decoded
# one by one (`wavetrain eval --split`'s recogs file). Target: WER of the long files <= WER of the
# pieces + 1 point. Prints both WERs (sclite's) and the real-time factor of the long files.
# usage: asr_long_audio.py WAVETRAIN RUN STORE [SPLIT] [UTTERANCES_PER_FILE] [FILES]
#   (from the directory the run was trained in: its config's paths are relative to it)
#   environment: TRANSCRIBE_ARGS, more options for `wavetrain transcribe` (e.g. --max-piece 8);
#                NOISE_DBFS, white noise at this level over each long file (e.g. -50: the pauses are
#                no longer silent, as in a real recording)
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import wave

import h5py
import numpy as np

wavetrain, run, store = sys.argv[1:4]
split = sys.argv[4] if len(sys.argv) > 4 else "test-unseen-voices"
per_file = int(sys.argv[5]) if len(sys.argv) > 5 else 25
files = int(sys.argv[6]) if len(sys.argv) > 6 else 12


def wavetrain_run(*args):
    r = subprocess.run([wavetrain, *args], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"asr_long_audio.py: wavetrain {' '.join(args)} failed:\n{r.stderr}")
    return r


def field(group, name, i):
    offsets = group[name]["offsets"]
    return group[name]["data"][offsets[i]:offsets[i + 1]]


def sclite(refs, hyps, work, name):  # {id: words}: (errors, words) as sclite counts them
    for kind, texts in (("ref", refs), ("hyp", hyps)):
        with open(f"{work}/{name}.{kind}.trn", "w") as f:
            for k, words in texts.items():
                f.write(" ".join(words) + f" (spk_{k})\n")
    out = subprocess.run(["sctk", "sclite", "-r", f"{work}/{name}.ref.trn", "trn", "-h", f"{work}/{name}.hyp.trn", "trn",
                          "-i", "spu_id", "-s", "-o", "pralign", "stdout"], capture_output=True, text=True, check=True).stdout
    c = s = d = i = 0
    for m in re.finditer(r"Scores: \(#C #S #D #I\) (\d+) (\d+) (\d+) (\d+)", out):
        c, s, d, i = c + int(m[1]), s + int(m[2]), d + int(m[3]), i + int(m[4])
    return s + d + i, c + s + d


evaluated = wavetrain_run("eval", run, "--split", split).stdout
# The recogs file it wrote (named by the run's decoding settings, e.g. greedy_search-max-sym-per-frame-2).
recogs = re.search(r"^written: (.*/recogs-[^/]*\.txt)$", evaluated, re.M)[1]
pieces = {}
for line in open(recogs):
    m = re.match(r"^(.*):\t(ref|hyp)=\[(.*)\]$", line.rstrip("\n"))
    words = re.findall(r"'([^']*)'|\"([^\"]*)\"", m[3])
    pieces.setdefault(m[1], {})[m[2]] = [a or b for a, b in words]

rng = random.Random(1)
with h5py.File(store, "r") as h, tempfile.TemporaryDirectory() as work:
    g = h[split]
    n = len(g["audio"]["offsets"]) - 1
    ids = [bytes(field(g, "id", k)).decode() if "id" in g else str(k) for k in range(n)]
    order = list(range(n))
    rng.shuffle(order)
    long_refs, piece_refs, piece_hyps, paths, seconds = {}, {}, {}, [], 0.0
    for f in range(files):
        chosen = order[f * per_file:(f + 1) * per_file]
        audio, words = [], []
        for k in chosen:
            audio.append(np.asarray(field(g, "audio", k), dtype=np.float32))
            audio.append(np.zeros(int(16000 * rng.uniform(0.3, 0.8)), dtype=np.float32))
            uid = ids[k]
            words += pieces[uid]["ref"]
            piece_refs[uid], piece_hyps[uid] = pieces[uid]["ref"], pieces[uid]["hyp"]
        samples = np.concatenate(audio)
        if os.environ.get("NOISE_DBFS"):
            noise = np.random.default_rng(f).standard_normal(len(samples)).astype(np.float32)
            samples = samples + noise * np.float32(10 ** (float(os.environ["NOISE_DBFS"]) / 20))
        seconds += len(samples) / 16000
        path = f"{work}/long{f:02d}.wav"
        with wave.open(path, "wb") as w:
            w.setnchannels(1), w.setsampwidth(2), w.setframerate(16000)
            w.writeframes((np.clip(samples, -1, 1) * 32767).round().astype("<i2").tobytes())
        paths.append(path)
        long_refs[f"long{f:02d}"] = words
    out = wavetrain_run("transcribe", run, *paths, "--format", "json", *os.environ.get("TRANSCRIBE_ARGS", "").split())
    transcripts = json.loads(out.stdout)
    long_hyps = {os.path.basename(t["file"])[:-4]: t["text"].split() for t in transcripts}
    piece_count = sum(len(t["pieces"]) for t in transcripts)
    e_long, n_long = sclite(long_refs, long_hyps, work, "long")
    e_piece, n_piece = sclite(piece_refs, piece_hyps, work, "pieces")
    rtf = re.search(r"\((\d+)x real time\)", out.stderr)
print(f"{split}: {files} files of {per_file} utterances, {seconds:.0f} s in all, decoded as {piece_count} pieces")
print(f"  WER of the utterances one by one: {100 * e_piece / n_piece:.2f}% ({e_piece} / {n_piece})")
print(f"  WER of the long files:            {100 * e_long / n_long:.2f}% ({e_long} / {n_long}), {rtf[1] if rtf else '?'}x real time")
print(f"  difference: {100 * e_long / n_long - 100 * e_piece / n_piece:+.2f} points (target: at most +1)")
