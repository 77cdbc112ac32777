# Test client (Debian's python3-torchaudio): Slaney mel filterbanks, the reference for wavetrain's
# mel_filterbank(). One line per case: "fft n_mels rate v0 v1 ..." with the [n_mels, n_freqs]
# matrix flattened (torchaudio returns it transposed).
import torchaudio

for fft, mels, rate in [(1024, 64, 48000), (2048, 128, 44100), (512, 40, 16000)]:
    fb = torchaudio.functional.melscale_fbanks(fft // 2 + 1, 0.0, rate / 2, mels, rate, norm="slaney", mel_scale="slaney")
    print(fft, mels, rate, " ".join(repr(float(v)) for v in fb.t().reshape(-1)))
