# Test client (librosa in the project's .venv, the library auraloss's MelSTFTLoss calls): Slaney mel
# filterbanks, including odd FFT sizes, whose bins librosa places at rfftfreq (k sr / n). One line
# per case: "fft n_mels rate v0 v1 ..." with the [n_mels, fft // 2 + 1] matrix flattened.
import librosa

for fft, mels, rate in [(1023, 40, 48000), (511, 32, 16000), (1024, 64, 48000)]:
    fb = librosa.filters.mel(sr=rate, n_fft=fft, n_mels=mels, htk=False, norm="slaney", dtype="float64")
    print(fft, mels, rate, " ".join(repr(float(v)) for v in fb.reshape(-1)))
