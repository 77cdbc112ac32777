// The built-in speech corpus (corpus_synth.h).
#include "experiments/asr/corpus_synth.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <stdexcept>
#include <thread>

#include "data/audio_io.h"
#include "data/hdf5_store.h"
#include "experiments/asr/seeding.h"
#include "experiments/asr/sentences.h"
#include "trainer/sweep/run_program.h"

namespace wavetrain::experiments::asr {
namespace {

namespace fs = std::filesystem;
using sweep::command_line;
using sweep::program_on_path;
using sweep::ProgramResult;
using sweep::run_program;

const std::vector<std::string> kAccents = {"en-us", "en-gb", "en-gb-scotland", "en-gb-x-rp",
                                           "en-gb-x-gbclan", "en-gb-x-gbcwmd", "en-029", "en-us-nyc"};
// espeak-ng's voice variants (its espeak-ng-data/voices/!v): disjoint sets for training and for the
// unseen-voice test.
const std::vector<std::string> kTrainVariants = {"m1", "m2", "m3", "m5", "m7", "f1", "f2", "f4", "klatt", "klatt3"};
const std::vector<std::string> kUnseenVariants = {"m4", "m6", "m8", "f3", "f5", "klatt2", "klatt4"};
// The recorded speaker behind each voice of flite and festival, so that no speaker straddles
// training and testing: flite's slt, rms and awb are CMU ARCTIC speakers (festival's us-slt-hts is
// ARCTIC's slt again), and flite's kal and kal16 are the diphone speaker of festival's kal.
struct EngineVoice {
  std::string name, speaker;
};
const std::vector<EngineVoice> kFliteTrainVoices = {{"rms", "arctic:rms"}, {"awb", "arctic:awb"}};
const std::vector<EngineVoice> kFliteTestVoices = {{"slt", "arctic:slt"}, {"kal16", "diphone:kal"}, {"kal", "diphone:kal"}};
// festival's English voices in Debian 12 (festvox-kallpc16k, festvox-kdlpc16k, festvox-us-slt-hts):
// the engine held out of training altogether.
const std::vector<EngineVoice> kFestivalVoices = {
    {"kal_diphone", "diphone:kal"}, {"ked_diphone", "diphone:ked"}, {"cmu_us_slt_arctic_hts", "arctic:slt"}};

// Everything about one utterance, drawn before any audio is made.
struct Utterance {
  std::string split, id, text;
  Voice voice;
  int speed = 175;        // espeak-ng words per minute
  int pitch = 50;         // espeak-ng 0-99
  double stretch = 1.0;   // flite's and festival's duration stretch
  int pitch_cents = 0;    // flite and festival: sox's pitch shift (they have no pitch option of their own)
  double peak = 0.5;      // peak level after normalisation
  bool reverb = false;
  int reverberance = 50, room_scale = 50;
  double snr_db = -1;     // < 0: no noise
  bool brown_noise = false;
  uint64_t noise_seed = 0;
};

Utterance plan_utterance(const SynthOptions& o, size_t split_number, const std::string& split, int64_t index,
                         const std::vector<std::string>* sentences) {
  std::mt19937_64 rng(seed_of(o.seed, split_number, index, 0));
  Utterance u;
  u.split = split;
  char id[64];
  std::snprintf(id, sizeof id, "%s-%06lld", split.c_str(), static_cast<long long>(index));
  u.id = id;
  // An engine first, then one of its voices: each engine gets an equal share of the split.
  const std::vector<Voice> voices = split_voices(split);
  std::vector<std::string> engines;
  for (const Voice& v : voices)
    if (std::find(engines.begin(), engines.end(), v.engine) == engines.end()) engines.push_back(v.engine);
  const std::string engine = engines[rng() % engines.size()];
  std::vector<Voice> of_engine;
  for (const Voice& v : voices)
    if (v.engine == engine) of_engine.push_back(v);
  u.voice = of_engine[rng() % of_engine.size()];
  u.speed = 130 + static_cast<int>(rng() % 81);
  u.pitch = 20 + static_cast<int>(rng() % 61);
  u.stretch = uniform(rng, 0.85, 1.2);
  u.peak = uniform(rng, 0.25, 0.9);
  u.reverb = o.reverb;
  u.reverberance = 10 + static_cast<int>(rng() % 61);
  u.room_scale = 20 + static_cast<int>(rng() % 81);
  const double snr = uniform(rng, 5, 30);
  if (o.noise) u.snr_db = snr;
  u.brown_noise = rng() % 2 == 1;
  u.noise_seed = rng();
  u.pitch_cents = static_cast<int>(rng() % 501) - 250;
  if (sentences) u.text = (*sentences)[rng() % sentences->size()];
  else u.text = SentenceGenerator(seed_of(o.seed, split_number, index, 1)).next();
  return u;
}

void check_program(const ProgramResult& r, const std::vector<std::string>& argv) {
  if (r.exit_code != 0)
    throw std::runtime_error(command_line(argv) + " failed (exit " + std::to_string(r.exit_code) + ")" +
                             (r.errors.empty() ? "" : ": " + r.errors));
}

// The utterance's audio: float32 [samples] at 16 kHz.
at::Tensor render(const Utterance& u, const fs::path& scratch) {
  const std::string raw = (scratch / (u.id + ".wav")).string(), wet = (scratch / (u.id + ".reverb.wav")).string();
  const std::string text_file = (scratch / (u.id + ".txt")).string(), shifted = (scratch / (u.id + ".pitch.wav")).string();
  std::vector<std::string> argv;
  if (u.voice.engine == "espeak-ng") {
    argv = {"espeak-ng", "-v", u.voice.name, "-s", std::to_string(u.speed), "-p", std::to_string(u.pitch), "-w", raw, u.text};
  } else if (u.voice.engine == "flite") {
    argv = {"flite", "-voice", u.voice.name, "--setf", "duration_stretch=" + std::to_string(u.stretch), "-t", u.text, "-o", raw};
  } else {  // festival's text2wave reads the text from a file
    std::ofstream(text_file) << u.text << "\n";
    argv = {"text2wave", "-eval", "(voice_" + u.voice.name + ")", "-eval", "(Parameter.set 'Duration_Stretch " + std::to_string(u.stretch) + ")",
            "-o", raw, text_file};
  }
  check_program(run_program(argv), argv);
  if (u.voice.engine == "festival") fs::remove(text_file);
  std::string file = raw;
  if (u.voice.engine != "espeak-ng" && u.pitch_cents != 0) {
    // -D: no dither on the 16-bit output, which sox would draw from a new random seed every run.
    const std::vector<std::string> sox = {"sox", "-D", raw, shifted, "pitch", std::to_string(u.pitch_cents)};
    check_program(run_program(sox), sox);
    fs::remove(raw);
    fs::rename(shifted, raw);
  }
  if (u.reverb) {
    const std::vector<std::string> sox = {"sox", "-D", raw, wet, "reverb", std::to_string(u.reverberance), "50",
                                          std::to_string(u.room_scale)};
    check_program(run_program(sox), sox);
    file = wet;
  }
  data::ReadOptions read;
  read.channels = 1;
  read.sample_rate = kCorpusSampleRate;
  at::Tensor audio = data::read_audio(file, read).samples[0].contiguous();
  fs::remove(raw);
  if (u.reverb) fs::remove(wet);
  if (audio.numel() == 0) throw std::runtime_error(command_line(argv) + " produced no audio");
  const double peak = audio.abs().max().item<double>();
  if (peak > 0) audio.mul_(u.peak / peak);
  if (u.snr_db >= 0) {
    // Noise at the utterance's SNR against the power of the whole utterance.
    std::mt19937_64 rng(u.noise_seed);
    at::Tensor noise = at::empty_like(audio);
    float* n = noise.data_ptr<float>();
    double state = 0;
    for (int64_t i = 0; i < noise.numel(); ++i) {
      const double white = uniform01(rng) * 2 - 1;
      n[i] = static_cast<float>(u.brown_noise ? (state = 0.98 * state + 0.2 * white) : white);
    }
    const double signal_power = audio.pow(2).mean().item<double>();
    const double noise_power = noise.pow(2).mean().item<double>();
    if (signal_power > 0 && noise_power > 0)
      audio.add_(noise, std::sqrt(signal_power / noise_power * std::pow(10.0, -u.snr_db / 10)));
    const double after = audio.abs().max().item<double>();
    if (after > 0.99) audio.mul_(0.99 / after);  // the noise must not make it clip
  }
  return audio;
}


// The line of a program's --version output that holds its version ("version: flite-2.2-current ..."
// is flite's second line), trimmed.
std::string version_line(const std::string& output) {
  size_t at = output.find("version");
  if (at == std::string::npos) at = 0;  // espeak-ng: "eSpeak NG text-to-speech: 1.51 ..." on its first line
  const size_t begin = output.rfind('\n', at) == std::string::npos ? 0 : output.rfind('\n', at) + 1;
  std::string line = output.substr(begin, output.find('\n', at) - begin);
  line.erase(0, line.find_first_not_of(' '));
  return line;
}

double cpu_seconds() {
  double total = 0;
  for (int who : {RUSAGE_SELF, RUSAGE_CHILDREN}) {
    rusage r{};
    getrusage(who, &r);
    total += static_cast<double>(r.ru_utime.tv_sec + r.ru_stime.tv_sec) + 1e-6 * static_cast<double>(r.ru_utime.tv_usec + r.ru_stime.tv_usec);
  }
  return total;
}

}  // namespace

data::Item asr_store_item(const at::Tensor& audio, const std::string& text, const std::string& speaker, const std::string& voice) {
  const auto utf8 = [](const std::string& v) {
    at::Tensor t = at::empty({static_cast<int64_t>(v.size())}, at::kByte);
    std::copy(v.begin(), v.end(), t.data_ptr<uint8_t>());
    return t;
  };
  const double seconds = static_cast<double>(audio.numel()) / kCorpusSampleRate;
  data::Item item = {{"audio", audio}, {"text", utf8(text)}, {"speaker", utf8(speaker)}, {"duration", at::full({1}, seconds, at::kDouble)}};
  if (!voice.empty()) item["voice"] = utf8(voice);
  return item;
}

std::string utf8_field(const at::Tensor& bytes) {
  const at::Tensor b = bytes.contiguous();
  return {reinterpret_cast<const char*>(b.data_ptr<uint8_t>()), static_cast<size_t>(b.numel())};
}

std::vector<std::string> corpus_splits() { return {"train", "dev", "test-unseen-voices", "test-held-out-engine"}; }

std::vector<Voice> split_voices(const std::string& split) {
  std::vector<Voice> voices;
  if (split == "test-held-out-engine") {
    for (const EngineVoice& v : kFestivalVoices) voices.push_back({"festival", v.name, v.speaker});
    return voices;
  }
  const std::vector<std::string>* variants = nullptr;
  const std::vector<EngineVoice>* flite = nullptr;
  if (split == "train" || split == "dev") variants = &kTrainVariants, flite = &kFliteTrainVoices;
  else if (split == "test-unseen-voices") variants = &kUnseenVariants, flite = &kFliteTestVoices;
  else throw std::invalid_argument("no corpus split '" + split + "' (train, dev, test-unseen-voices, test-held-out-engine)");
  // An espeak-ng voice is its variant (the voice's formants, pitch and breath) speaking an accent.
  for (const std::string& accent : kAccents)
    for (const std::string& variant : *variants) voices.push_back({"espeak-ng", accent + "+" + variant, "espeak-ng:" + variant});
  for (const EngineVoice& v : *flite) voices.push_back({"flite", v.name, v.speaker});
  return voices;
}

void check_synth_programs(bool reverb) {
  std::vector<std::pair<std::string, std::string>> needed = {
      {"espeak-ng", "espeak-ng"}, {"flite", "flite"}, {"text2wave", "festival"}, {"sox", "sox"}};
  (void)reverb;  // sox shifts flite's and festival's pitch, with or without reverb
  std::string missing;
  for (const auto& [program, package] : needed)
    if (!program_on_path(program)) missing += (missing.empty() ? "" : ", ") + program + " (Debian package " + package + ")";
  if (!missing.empty())
    throw std::runtime_error("asr-synth needs programs that are not installed: " + missing +
                             "; scripts/setup installs them, or: apt-get install espeak-ng flite festival festvox-kallpc16k "
                             "festvox-kdlpc16k festvox-us-slt-hts sox");
  // espeak-ng speaks with its default voice, without complaint, for a variant it does not have; the
  // lists are checked here instead.
  const std::string accents = run_program({"espeak-ng", "--voices=en"}, true).output;
  const std::string variants = run_program({"espeak-ng", "--voices=variant"}, true).output;
  const std::string flite_voices = run_program({"flite", "-lv"}, true).output;
  std::string absent;
  for (const std::string& a : kAccents)
    if (accents.find(" " + a + " ") == std::string::npos) absent += " espeak-ng:" + a;
  for (const auto* list : {&kTrainVariants, &kUnseenVariants})
    for (const std::string& v : *list)
      if (variants.find("!v/" + v + " ") == std::string::npos && variants.find("!v/" + v + "\n") == std::string::npos)
        absent += " espeak-ng variant " + v;
  for (const auto* list : {&kFliteTrainVoices, &kFliteTestVoices})
    for (const EngineVoice& v : *list)
      if (flite_voices.find(" " + v.name + " ") == std::string::npos && flite_voices.find(" " + v.name + "\n") == std::string::npos)
        absent += " flite:" + v.name;
  // festival lists the voices it has installed as a Scheme list.
  const std::string festival_voices = run_program({"festival", "-b", "(print (voice.list))"}, true).output;
  for (const EngineVoice& v : kFestivalVoices)
    if (festival_voices.find(v.name) == std::string::npos) absent += " festival:" + v.name;
  if (!absent.empty())
    throw std::runtime_error("asr-synth: voices missing from this espeak-ng/flite/festival:" + absent +
                             " (Debian 12's espeak-ng 1.51 and flite 2.2 have them all; festival's come in festvox-kallpc16k, "
                             "festvox-kdlpc16k and festvox-us-slt-hts)");
}

std::vector<std::string> read_sentence_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot open the sentence file");
  std::vector<std::string> sentences;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    bool digit = false;
    const std::string text = normalize_transcript(line, &digit);
    if (digit)
      throw std::runtime_error(path + ":" + std::to_string(number) + ": a digit in '" + line +
                               "': write numbers as words, as they are to be spoken and transcribed");
    if (!text.empty()) sentences.push_back(text);
  }
  if (sentences.empty()) throw std::runtime_error(path + ": no sentence (expected one sentence a line)");
  return sentences;
}

SynthReport synthesize_corpus(const SynthOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  const double cpu_start = cpu_seconds();
  check_synth_programs(o.reverb);
  std::vector<std::string> sentences;
  if (!o.text_file.empty()) sentences = read_sentence_file(o.text_file);
  for (const auto& [name, n] : {std::pair<const char*, int64_t>{"train", o.train}, {"dev", o.dev}, {"test", o.test}})
    if (n < 0) throw std::invalid_argument(std::string("asr-synth: --") + name + " must be >= 0, got " + std::to_string(n));

  fs::create_directories(o.dir);
  const fs::path scratch = fs::path(o.dir) / (".asr-synth-" + std::to_string(getpid()));
  fs::create_directories(scratch);
  struct RemoveScratch {
    fs::path path;
    ~RemoveScratch() {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  } remove_scratch{scratch};

  SynthReport report;
  report.store = (fs::path(o.dir) / "corpus.h5").string();
  data::DatasetWriter writer(report.store, o.command);
  const int jobs = o.jobs > 0 ? o.jobs : std::max(1u, std::thread::hardware_concurrency());
  nlohmann::json record;
  const std::vector<std::string> splits = corpus_splits();
  for (size_t s = 0; s < splits.size(); ++s) {
    const std::string& split = splits[s];
    const int64_t count = split == "train" ? o.train : split == "dev" ? o.dev : o.test;
    std::vector<Utterance> plan;
    for (int64_t i = 0; i < count; ++i) plan.push_back(plan_utterance(o, s, split, i, o.text_file.empty() ? nullptr : &sentences));
    // Rendered by `jobs` threads, each running one synthesiser at a time; written in plan order.
    std::vector<at::Tensor> audio(plan.size());
    std::atomic<size_t> next{0};
    std::exception_ptr failure;
    std::mutex failure_mutex;
    std::vector<std::thread> threads;
    for (int j = 0; j < jobs; ++j)
      threads.emplace_back([&] {
        for (size_t i; (i = next++) < plan.size();) {
          try {
            audio[i] = render(plan[i], scratch);
          } catch (...) {
            std::lock_guard<std::mutex> lock(failure_mutex);
            if (!failure) failure = std::current_exception();
            next = plan.size();
          }
        }
      });
    for (std::thread& t : threads) t.join();
    if (failure) std::rethrow_exception(failure);

    SplitReport r;
    r.split = split;
    std::set<std::string> used;
    for (size_t i = 0; i < plan.size(); ++i) {
      const double seconds = static_cast<double>(audio[i].numel()) / kCorpusSampleRate;
      writer.add(split, asr_store_item(audio[i], plan[i].text, plan[i].voice.speaker, plan[i].voice.id()), plan[i].id);
      used.insert(plan[i].voice.id());
      r.seconds += seconds;
      audio[i] = at::Tensor();
    }
    r.utterances = count;
    r.voices.assign(used.begin(), used.end());
    std::vector<std::string> offered;
    std::set<std::string> speakers;
    for (const Voice& v : split_voices(split)) offered.push_back(v.id()), speakers.insert(v.speaker);
    record["splits"][split] = {{"utterances", count}, {"seconds", r.seconds}, {"voices_used", r.voices}, {"voices", offered},
                               {"speakers", std::vector<std::string>(speakers.begin(), speakers.end())}};
    report.splits.push_back(r);
  }
  record["seed"] = o.seed;
  record["text"] = o.text_file.empty() ? "built-in sentence generator" : o.text_file;
  record["noise_snr_db"] = o.noise ? nlohmann::json::array({5, 30}) : nlohmann::json(nullptr);
  record["reverb"] = o.reverb;
  record["espeak_ng"] = version_line(run_program({"espeak-ng", "--version"}, true).output);
  record["flite"] = version_line(run_program({"flite", "--version"}, true).output);
  record["festival"] = version_line(run_program({"festival", "--version"}, true).output);
  record["held_out_engine"] = "festival";
  writer.set_attribute("sample_rate", int64_t{kCorpusSampleRate});
  writer.set_attribute("corpus", record.dump());
  writer.finish();
  report.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  report.cpu_seconds = cpu_seconds() - cpu_start;
  return report;
}

}  // namespace wavetrain::experiments::asr
