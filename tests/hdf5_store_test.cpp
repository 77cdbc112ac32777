// The HDF5 dataset store: round trip, h5py (Debian's python3-h5py, test-only) reading a store
// wavetrain built, an interrupted build leaving no valid-looking file, errors, concurrent readers.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "tests/run_process.h"
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <functional>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <nlohmann/json.hpp>

#include "data/hdf5_store.h"

#include <hdf5.h>

namespace wavetrain::data {
namespace {

std::string store_temp_dir() {
  static const std::string dir = [] {
    const std::string d = (std::filesystem::temp_directory_path() / ("wavetrain_store_" + std::to_string(::getpid()))).string();
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

// Items with a variable-length float32 [n][3] field and an int64 [m] field.
Item make_item(int64_t i) {
  return {{"features", at::arange((i % 7 + 1) * 3, at::kFloat).view({-1, 3}) + static_cast<float>(i)},
          {"tokens", at::arange(i % 4, at::kLong) * 10 + i}};
}

void build(const std::string& path, int64_t train_items, int64_t valid_items) {
  DatasetWriter w(path, "hdf5_store_test build");
  w.set_attribute("sample_rate", int64_t{16000});
  w.set_attribute("features", std::string("{\"num_mel_bins\": 3}"));
  for (int64_t i = 0; i < train_items; ++i) w.add("train", make_item(i), "utt-" + std::to_string(i));
  for (int64_t i = 0; i < valid_items; ++i) w.add("valid", make_item(100 + i), "v-" + std::to_string(i));
  w.finish();
}

TEST(Hdf5Store, RoundTripWithLengthsIdsAndAttributes) {
  const std::string path = store_temp_dir() + "/round.h5";
  build(path, 30, 5);
  const DatasetReader r(path);
  EXPECT_EQ(r.splits(), (std::vector<std::string>{"train", "valid"}));
  EXPECT_EQ(r.fields("train"), (std::vector<std::string>{"features", "tokens"}));
  EXPECT_EQ(r.size("train"), 30);
  EXPECT_EQ(r.size("valid"), 5);
  for (int64_t i = 0; i < 30; ++i) {
    const Item got = r.item("train", i), want = make_item(i);
    EXPECT_TRUE(at::equal(got.at("features"), want.at("features"))) << i;
    EXPECT_TRUE(at::equal(got.at("tokens"), want.at("tokens"))) << i;
    EXPECT_EQ(r.length("train", "features", i), want.at("features").size(0));
    EXPECT_EQ(r.id("train", i), "utt-" + std::to_string(i));
  }
  EXPECT_EQ(std::get<int64_t>(*r.attribute("sample_rate")), 16000);
  EXPECT_EQ(std::get<std::string>(*r.attribute("format")), kStoreFormat);
  EXPECT_EQ(std::get<std::string>(*r.attribute("command")), "hdf5_store_test build");
  EXPECT_FALSE(r.attribute("nothing"));
}

TEST(Hdf5Store, H5pyReadsWhatWavetrainWrote) {
  const std::string path = store_temp_dir() + "/h5py.h5";
  build(path, 12, 3);
  const std::string out = wavetrain::testing::python_output("h5py_read_store.py " + path);
  if (out.empty()) GTEST_SKIP() << WAVETRAIN_TEST_PYTHON << " cannot import h5py: install Debian's python3-h5py";
  const nlohmann::json j = nlohmann::json::parse(out);
  EXPECT_EQ(j["attributes"]["format"], kStoreFormat);
  EXPECT_EQ(j["attributes"]["sample_rate"], 16000);
  EXPECT_EQ(j["attributes"]["complete"], 1);
  const DatasetReader r(path);
  for (const char* split : {"train", "valid"}) {
    ASSERT_EQ(j["splits"][split]["items"].get<int64_t>(), r.size(split));
    for (int64_t i = 0; i < r.size(split); ++i) {
      const nlohmann::json& item = j["splits"][split]["data"][static_cast<size_t>(i)];
      const Item mine = r.item(split, i);
      const at::Tensor f = mine.at("features");
      std::vector<std::vector<float>> rows(static_cast<size_t>(f.size(0)), std::vector<float>(3));
      for (int64_t a = 0; a < f.size(0); ++a)
        for (int64_t b = 0; b < 3; ++b) rows[static_cast<size_t>(a)][static_cast<size_t>(b)] = f[a][b].item<float>();
      EXPECT_EQ(item["features"].get<std::vector<std::vector<float>>>(), rows) << split << i;
      const at::Tensor t = mine.at("tokens");
      EXPECT_EQ(item["tokens"].get<std::vector<int64_t>>(), std::vector<int64_t>(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel()));
      EXPECT_EQ(item["id"], r.id(split, i));
    }
  }
}

TEST(Hdf5Store, KillingTheBuilderLeavesNoValidLookingFile) {
  const std::string path = store_temp_dir() + "/killed.h5";
  build(path, 3, 1);  // an earlier, complete version
  const pid_t child = fork();
  if (child == 0) {
    DatasetWriter w(path, "endless build");
    for (int64_t i = 0;; ++i) w.add("train", {{"features", at::randn({1000, 80})}});  // killed below
  }
  // Wait until the partial file exists and has grown, then kill the builder.
  const std::string partial = store_temp_dir() + "/.killed.h5.partial-" + std::to_string(child);
  for (int i = 0; i < 400 && !(std::filesystem::exists(partial) && std::filesystem::file_size(partial) > (2u << 20)); ++i)
    usleep(10000);
  ASSERT_TRUE(std::filesystem::exists(partial));
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  // The target is still the earlier complete file; the partial one is refused.
  const DatasetReader r(path);
  EXPECT_EQ(r.size("train"), 3);
  try {
    DatasetReader bad(partial);
    ADD_FAILURE() << "a partial file was accepted";
  } catch (const StoreError& e) {
    const std::string what = e.what();
    EXPECT_TRUE(what.find("incomplete") != std::string::npos || what.find("cannot be opened") != std::string::npos ||
                what.find("not an HDF5 file") != std::string::npos || what.find("not a wavetrain dataset") != std::string::npos ||
                what.find("truncated or damaged") != std::string::npos)
        << what;
  }
  // The next build of the same store removes what the killed one left, but not the partial file of
  // a writer that is still alive (this test's parent process stands for one).
  const std::string live = store_temp_dir() + "/.killed.h5.partial-" + std::to_string(::getppid());
  std::ofstream(live) << "another writer's";
  const std::string other_store = store_temp_dir() + "/.killed2.h5.partial-" + std::to_string(child);
  std::ofstream(other_store) << "another store's";
  build(path, 4, 1);
  EXPECT_FALSE(std::filesystem::exists(partial));
  EXPECT_TRUE(std::filesystem::exists(live));
  EXPECT_TRUE(std::filesystem::exists(other_store));
  EXPECT_EQ(DatasetReader(path).size("train"), 4);
  std::filesystem::remove(live);
  std::filesystem::remove(other_store);
  // An exception mid-build (here: a mismatched item) also removes the partial file.
  try {
    DatasetWriter w(store_temp_dir() + "/thrown.h5");
    w.add("train", make_item(1));
    w.add("train", {{"features", at::zeros({2, 4})}, {"tokens", at::zeros({1}, at::kLong)}});
    ADD_FAILURE() << "no error";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("split 'train' item 1 field 'features': expected [*, 3] Float like earlier items, got [2, 4] Float"),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(store_temp_dir() + "/thrown.h5"));
  EXPECT_FALSE(std::filesystem::exists(store_temp_dir() + "/.thrown.h5.partial-" + std::to_string(::getpid())));
}

TEST(Hdf5Store, ErrorsNameTheFileAndItem) {
  const std::string text = store_temp_dir() + "/text.h5";
  std::ofstream(text) << "hello";
  try {
    DatasetReader r(text);
    ADD_FAILURE();
  } catch (const StoreError& e) {
    EXPECT_EQ(std::string(e.what()), text + ": not an HDF5 file");
  }
  const std::string path = store_temp_dir() + "/errors.h5";
  build(path, 2, 0);
  const DatasetReader r(path);
  EXPECT_THROW(r.item("train", 2), StoreError);
  EXPECT_THROW(r.item("test", 0), StoreError);
  try {
    DatasetWriter w(store_temp_dir() + "/fields.h5");
    w.add("train", make_item(1));
    w.add("train", {{"features", at::zeros({2, 3})}});
    ADD_FAILURE();
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("split 'train' item 1 has fields {features, id}, earlier items {features, id, tokens}"),
              std::string::npos)
        << e.what();
  }
}

TEST(Hdf5Store, ConcurrentReadersSeeTheSameItems) {
  const std::string path = store_temp_dir() + "/threads.h5";
  build(path, 200, 0);
  const DatasetReader r(path, /*cache_items=*/16);
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int64_t k = 0; k < 400; ++k) {
        const int64_t i = (k * 37 + t * 11) % 200;
        if (!at::equal(r.item("train", i).at("features"), make_item(i).at("features"))) ++mismatches;
      }
    });
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

// ---- damaged files ----------------------------------------------------------------------------

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void put_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

std::string le(uint64_t v, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += static_cast<char>((v >> (8 * i)) & 0xFF);
  return s;
}

// A minimal valid store written with HDF5's defaults (version-1 object headers, no checksums), the
// way h5py writes one: attributes as variable-length strings, one split with one field.
void write_plain_hdf5_store(const std::string& path) {
  const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  const hid_t scalar = H5Screate(H5S_SCALAR);
  const hid_t text = H5Tcopy(H5T_C_S1);
  H5Tset_size(text, H5T_VARIABLE);
  H5Tset_cset(text, H5T_CSET_UTF8);
  const char* format = "wavetrain-dataset";
  hid_t a = H5Acreate2(file, "format", text, scalar, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(a, text, &format);
  H5Aclose(a);
  const int64_t one = 1;
  a = H5Acreate2(file, "complete", H5T_NATIVE_INT64, scalar, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(a, H5T_NATIVE_INT64, &one);
  H5Aclose(a);
  const hid_t split = H5Gcreate2(file, "train", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  const hid_t field = H5Gcreate2(split, "x", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  const float values[4] = {1, 2, 3, 4};
  const int64_t offsets[3] = {0, 1, 4};
  hsize_t n = 4;
  hid_t space = H5Screate_simple(1, &n, nullptr);
  hid_t d = H5Dcreate2(field, "data", H5T_NATIVE_FLOAT, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values);
  H5Dclose(d);
  H5Sclose(space);
  n = 3;
  space = H5Screate_simple(1, &n, nullptr);
  d = H5Dcreate2(field, "offsets", H5T_NATIVE_INT64, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, offsets);
  H5Dclose(d);
  H5Sclose(space);
  H5Gclose(field);
  H5Gclose(split);
  H5Tclose(text);
  H5Sclose(scalar);
  H5Fclose(file);
}

// The offset of the 4-byte global-heap object index that the 'format' attribute's reference holds:
// the string's length (17) and the heap collection's address come just before it.
size_t format_heap_index_offset(const std::string& bytes) {
  const size_t heap = bytes.find("GCOL");
  if (heap == std::string::npos) return std::string::npos;
  const size_t at = bytes.find(le(17, 4) + le(heap, 8));
  return at == std::string::npos ? at : at + 12;
}

// The audit's crash: 4 changed bytes (the heap object index of the first string attribute) made
// H5Aread dereference a heap object that does not exist (SIGSEGV). Both a store wavetrain writes
// (checksummed headers) and one written with HDF5's defaults (no checksums) must give an error
// naming the file.
TEST(Hdf5Store, DamagedStringAttributeReferenceIsAnErrorNotACrash) {
  const std::string ours = store_temp_dir() + "/ours.h5", plain = store_temp_dir() + "/plain.h5";
  build(ours, 3, 1);
  write_plain_hdf5_store(plain);
  ASSERT_EQ(DatasetReader(plain).size("train"), 2);  // valid before it is damaged
  for (const std::string& path : {ours, plain}) {
    const std::string good = file_bytes(path);
    const size_t index = format_heap_index_offset(good);
    ASSERT_NE(index, std::string::npos) << path;
    for (const uint32_t wrong : {2u, 77u, 0xFFFFu, 0x7FFFFFFFu}) {
      std::string bad = good;
      bad.replace(index, 4, le(wrong, 4));
      put_bytes(path, bad);
      try {
        DatasetReader r(path);
        FAIL() << path << ": heap index " << wrong << " was accepted";
      } catch (const StoreError& e) {
        EXPECT_EQ(std::string(e.what()).rfind(path + ": ", 0), 0u) << e.what();
      }
    }
    put_bytes(path, good);
  }
}

// The other half of a string's reference: the heap object itself. An object whose size runs past
// its collection, or a collection size past the end of the file.
TEST(Hdf5Store, DamagedGlobalHeapIsAnErrorNotACrash) {
  const std::string plain = store_temp_dir() + "/plain_heap.h5";
  write_plain_hdf5_store(plain);
  const std::string good = file_bytes(plain);
  const size_t heap = good.find("GCOL"), text = good.find("wavetrain-dataset");
  ASSERT_NE(heap, std::string::npos);
  ASSERT_NE(text, std::string::npos);
  std::string bad = good;
  bad.replace(text - 8, 8, le(uint64_t{1} << 40, 8));  // the object's size
  put_bytes(plain, bad);
  try {
    DatasetReader r(plain);
    FAIL() << "a heap object larger than its collection was accepted";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("more than its collection holds"), std::string::npos) << e.what();
  }
  bad = good;
  bad.replace(heap + 8, 8, le(uint64_t{1} << 50, 8));  // the collection's size
  put_bytes(plain, bad);
  EXPECT_THROW(DatasetReader r(plain), StoreError);
}

// Chunks carry Fletcher-32 checksums: a flipped byte in a compressed chunk is an error on reading
// that item, never different numbers.
TEST(Hdf5Store, DamagedChunkFailsItsChecksum) {
  const std::string path = store_temp_dir() + "/chunk.h5";
  {
    DatasetWriter w(path);
    w.add("train", {{"x", at::arange(1000, at::kFloat)}});
    w.finish();
  }
  {
    const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    const hid_t d = H5Dopen2(f, "/train/x/data", H5P_DEFAULT);
    const hid_t plist = H5Dget_create_plist(d);
    EXPECT_GT(H5Pget_nfilters(plist), 2);  // shuffle, deflate, fletcher32
    EXPECT_GT(H5Pget_filter_by_id2(plist, H5Z_FILTER_FLETCHER32, nullptr, nullptr, nullptr, 0, nullptr, nullptr), -1);
    haddr_t chunk = HADDR_UNDEF;
    hsize_t chunk_size = 0, origin = 0;
    H5Dget_chunk_info_by_coord(d, &origin, nullptr, &chunk, &chunk_size);
    H5Pclose(plist);
    H5Dclose(d);
    H5Fclose(f);
    ASSERT_NE(chunk, HADDR_UNDEF);
    std::string bytes = file_bytes(path);
    bytes[chunk + chunk_size / 2] ^= 0x5A;
    put_bytes(path, bytes);
  }
  DatasetReader r(path);
  try {
    r.item("train", 0);
    FAIL() << "a damaged chunk was read";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("damaged data"), std::string::npos) << e.what();
  }
}

// A store that claims absurd sizes is refused before anything is allocated for them.
TEST(Hdf5Store, AbsurdSizesAreRefusedBeforeAllocation) {
  const std::string path = store_temp_dir() + "/absurd.h5";
  // Item 1 of 4 values claims 2^40 of them: data is grown, unwritten (HDF5 reads zeros there).
  auto claim_2_to_the_40 = [&](bool chunked) {
    write_plain_hdf5_store(path);
    const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    H5Ldelete(f, "/train/x/data", H5P_DEFAULT);
    H5Ldelete(f, "/train/x/offsets", H5P_DEFAULT);
    const hid_t g = H5Gopen2(f, "/train/x", H5P_DEFAULT);
    hsize_t n = hsize_t{1} << 40, max = H5S_UNLIMITED, chunk = 1024;
    hid_t space = H5Screate_simple(1, &n, chunked ? &max : nullptr);
    const hid_t plist = H5Pcreate(H5P_DATASET_CREATE);
    if (chunked) H5Pset_chunk(plist, 1, &chunk);  // else contiguous, allocated when first written
    H5Dclose(H5Dcreate2(g, "data", H5T_NATIVE_FLOAT, space, H5P_DEFAULT, plist, H5P_DEFAULT));
    H5Pclose(plist);
    H5Sclose(space);
    const int64_t offsets[3] = {0, 1, int64_t{1} << 40};
    n = 3;
    space = H5Screate_simple(1, &n, nullptr);
    const hid_t d = H5Dcreate2(g, "offsets", H5T_NATIVE_INT64, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, offsets);
    H5Dclose(d);
    H5Sclose(space);
    H5Gclose(g);
    H5Fclose(f);
  };
  // Chunked: a store holds every chunk of its grid, and this one holds none of its 2^30.
  claim_2_to_the_40(true);
  try {
    DatasetReader r(path);
    FAIL() << "opened a store without its chunks";
  } catch (const StoreError& e) {
    EXPECT_EQ(std::string(e.what()), path + ": split 'train' field 'x': its chunk index holds 0 chunks where its size and chunk size make "
                                            "1073741824 (damaged?)");
  }
  // Contiguous and never written (h5py's create_dataset(shape=...)): HDF5 would read fill values,
  // and the item of 2^40 values would be allocated first. Refused on opening.
  claim_2_to_the_40(false);
  try {
    DatasetReader r(path);
    FAIL() << "opened a store whose data was never written";
  } catch (const StoreError& e) {
    EXPECT_EQ(std::string(e.what()), path + ": split 'train' field 'x': its data declares 1099511627776 values (4398046511104 bytes) but "
                                            "none were written (damaged?)");
  }
}

// The audit's store: a contiguous dataset whose declared size (here 2^28 float32, 1 GiB) runs far
// past the end of the file. Refused on opening, before the item is allocated; the message names
// the file, the field and the sizes.
TEST(Hdf5Store, DeclaredDataPastTheEndOfTheFileIsRefused) {
  const std::string path = store_temp_dir() + "/past_end.h5";
  write_plain_hdf5_store(path);
  std::string bytes = file_bytes(path);
  // The data's dataspace message (version 1, rank 1, with a maximum): its size 4 and maximum 4.
  const std::string dims_4 = std::string("\x01\x01\x01\x00\x00\x00\x00\x00", 8) + le(4, 8) + le(4, 8);
  const size_t at = bytes.find(dims_4);
  ASSERT_NE(at, std::string::npos);
  ASSERT_EQ(bytes.find(dims_4, at + 1), std::string::npos);  // the only one
  bytes.replace(at + 8, 16, le(uint64_t{1} << 28, 8) + le(uint64_t{1} << 28, 8));
  put_bytes(path, bytes);
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  const hid_t d = H5Dopen2(f, "/train/x/data", H5P_DEFAULT);
  const haddr_t offset = H5Dget_offset(d);
  H5Dclose(d);
  H5Fclose(f);
  try {
    DatasetReader r(path);
    FAIL() << "opened a store declaring 2^28 values in " << bytes.size() << " bytes";
  } catch (const StoreError& e) {
    EXPECT_EQ(std::string(e.what()), path + ": split 'train' field 'x': its data declares 268435456 values (1073741824 bytes) at byte " +
                                         std::to_string(offset) + ", past the end of the file (" + std::to_string(bytes.size()) +
                                         " bytes; damaged?)");
  }
}

// A store a newer wavetrain wrote may mean something else by the same names: refused, naming the
// version found and the version read. A store without the attribute (h5py's) reads as version 1.
TEST(Hdf5Store, NewerFormatVersionIsRefused) {
  const std::string path = store_temp_dir() + "/version.h5";
  build(path, 2, 1);
  EXPECT_EQ(std::get<int64_t>(*DatasetReader(path).attribute("format_version")), kStoreFormatVersion);
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  const hid_t a = H5Aopen(f, "format_version", H5P_DEFAULT);
  const int64_t two = 2;
  ASSERT_GE(H5Awrite(a, H5T_NATIVE_INT64, &two), 0);
  H5Aclose(a);
  H5Fclose(f);
  try {
    DatasetReader r(path);
    FAIL() << "opened a version-2 store";
  } catch (const StoreError& e) {
    EXPECT_EQ(std::string(e.what()), path + ": format_version 2 is newer than this wavetrain reads (version 1); a newer wavetrain wrote it");
  }
  const std::string plain = store_temp_dir() + "/no_version.h5";
  write_plain_hdf5_store(plain);
  EXPECT_EQ(DatasetReader(plain).size("train"), 2);
}

// sample_rate, when a store has one, is a number in (0, 1 MHz]: int64 or float64.
TEST(Hdf5Store, SampleRateMustBePositiveAndAtMostOneMegahertz) {
  const std::string path = store_temp_dir() + "/rate.h5";
  auto with_rate = [&](const AttributeValue& rate) {
    DatasetWriter w(path);
    w.set_attribute("sample_rate", rate);
    w.add("train", {{"x", at::zeros({4})}});
    w.finish();
    try {
      DatasetReader r(path);
      return std::string("opened");
    } catch (const StoreError& e) {
      return std::string(e.what());
    }
  };
  EXPECT_EQ(with_rate(int64_t{48000}), "opened");
  EXPECT_EQ(with_rate(44100.0), "opened");
  EXPECT_EQ(with_rate(1e6), "opened");
  EXPECT_EQ(with_rate(int64_t{0}), path + ": attribute 'sample_rate' is 0 Hz; expected more than 0 and at most 1000000 Hz");
  EXPECT_EQ(with_rate(int64_t{-48000}), path + ": attribute 'sample_rate' is -48000 Hz; expected more than 0 and at most 1000000 Hz");
  EXPECT_EQ(with_rate(1e9), path + ": attribute 'sample_rate' is 1000000000 Hz; expected more than 0 and at most 1000000 Hz");
  EXPECT_EQ(with_rate(std::nan("")), path + ": attribute 'sample_rate' is nan Hz; expected more than 0 and at most 1000000 Hz");
  EXPECT_EQ(with_rate(std::string("48k")), path + ": attribute 'sample_rate' is a string; expected a number of Hz");
}

// Every dtype docs/data-format.md lists is read back as written, in either byte order (h5py may
// write big-endian ">f4"); another type is refused by name.
TEST(Hdf5Store, ListedDtypesAreReadInEitherByteOrder) {
  const std::string path = store_temp_dir() + "/dtypes.h5";
  {
    DatasetWriter w(path);
    w.add("train", {{"f64", at::tensor({0.25, -1.5}, at::kDouble)}, {"i16", at::tensor({-32768, 32767}, at::kShort)},
                    {"u8", at::tensor({0, 255}, at::kByte)}, {"i32", at::tensor({-7, 7}, at::kInt)}});
    w.finish();
  }
  const DatasetReader r(path);
  const Item item = r.item("train", 0);
  EXPECT_TRUE(at::equal(item.at("f64"), at::tensor({0.25, -1.5}, at::kDouble)));
  EXPECT_TRUE(at::equal(item.at("i16"), at::tensor({-32768, 32767}, at::kShort)));
  EXPECT_TRUE(at::equal(item.at("u8"), at::tensor({0, 255}, at::kByte)));
  EXPECT_TRUE(at::equal(item.at("i32"), at::tensor({-7, 7}, at::kInt)));

  const std::string plain = store_temp_dir() + "/dtypes_plain.h5";
  auto plain_with = [&](hid_t type) {
    const std::string& path = plain;
    write_plain_hdf5_store(path);
    const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    H5Ldelete(f, "/train/x/data", H5P_DEFAULT);
    const float values[4] = {1, 2, 3, 4};
    hsize_t n = 4;
    const hid_t space = H5Screate_simple(1, &n, nullptr);
    const hid_t d = H5Dcreate2(f, "/train/x/data", type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values);
    H5Dclose(d);
    H5Sclose(space);
    H5Fclose(f);
  };
  plain_with(H5T_IEEE_F32BE);
  EXPECT_TRUE(at::equal(DatasetReader(plain).item("train", 1).at("x"), at::tensor({2.0f, 3.0f, 4.0f})));
  plain_with(H5T_STD_I8LE);
  try {
    DatasetReader r(plain);
    FAIL() << "int8 accepted";
  } catch (const StoreError& e) {
    EXPECT_EQ(std::string(e.what()), plain + ": split 'train' field 'x': its data holds int8 values; the store uses float32, float64, int64, "
                                            "int32, int16 and uint8");
  }
}

// A full disk (here RLIMIT_FSIZE, which makes write() fail with EFBIG as ENOSPC would) in a child
// process: one StoreError naming the store and the system's reason, no partial file, and a normal
// exit afterwards. HDF5 1.10.8's exit handler used to crash on the file whose close had failed.
TEST(Hdf5Store, AFullDiskIsOneErrorAndTheProcessExitsNormally) {
  const std::string path = store_temp_dir() + "/full.h5";
  const at::Tensor values = at::randn({100000});  // 400 KB per item, made before the fork
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const pid_t child = fork();
  if (child == 0) {
    ::close(pipe_fds[0]);
    std::signal(SIGXFSZ, SIG_IGN);
    const struct rlimit limit = {64 << 10, 64 << 10};
    setrlimit(RLIMIT_FSIZE, &limit);
    std::string message = "no error";
    try {
      DatasetWriter w(path);
      for (int64_t i = 0; i < 16; ++i) w.add("train", {{"x", values}});
      w.finish();
    } catch (const StoreError& e) {
      message = e.what();
    }
    (void)!::write(pipe_fds[1], message.data(), message.size());
    ::close(pipe_fds[1]);
    std::exit(0);  // exit(), not _exit(): HDF5's exit-time cleanup, if registered, runs here
  }
  ::close(pipe_fds[1]);
  std::string message;
  char buf[512];
  for (ssize_t n; (n = ::read(pipe_fds[0], buf, sizeof(buf))) > 0;) message.append(buf, static_cast<size_t>(n));
  ::close(pipe_fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status << (WIFSIGNALED(status) ? " (a signal)" : "");
  EXPECT_EQ(message, path + ": cannot be written: File too large (writing train/x/data); nothing was left behind");
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(store_temp_dir() + "/.full.h5.partial-" + std::to_string(child)));
}

// The writer's own root attributes cannot be set twice (the second would fail in finish()).
TEST(Hdf5Store, WriterRefusesItsOwnAttributeNames) {
  DatasetWriter w(store_temp_dir() + "/own.h5");
  try {
    w.set_attribute("format_version", int64_t{2});
    FAIL() << "accepted";
  } catch (const StoreError& e) {
    EXPECT_EQ(std::string(e.what()), store_temp_dir() + "/own.h5: root attribute 'format_version' is written by the store itself");
  }
}

// The probe process: HDF5 runs over a store's structure in a child first, and a child that dies
// becomes an error naming the file instead of taking the program down.
TEST(Hdf5Store, ProbeTurnsACrashIntoAnError) {
  const std::string path = "probe.h5";
  EXPECT_NO_THROW(run_in_probe_process(path, [] {}));
  EXPECT_NO_THROW(run_in_probe_process(path, [] { throw StoreError("the parent reports this itself"); }));
  auto message = [&](const std::function<void()>& work) {
    try {
      run_in_probe_process(path, work);
    } catch (const StoreError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  // The parent's crash handlers (here one that exits with 42; under libFuzzer, its crash
  // reporter; under ASan, ASan's) are dropped in the child: its crash is the signal, nothing else.
  struct sigaction parent_handler = {}, saved_segv = {}, saved_abrt = {};
  parent_handler.sa_handler = [](int) { ::_exit(42); };
  sigaction(SIGSEGV, &parent_handler, &saved_segv);
  sigaction(SIGABRT, &parent_handler, &saved_abrt);
  EXPECT_EQ(message([] { std::raise(SIGSEGV); }), "probe.h5: damaged: reading its structure crashed HDF5 (Segmentation fault, in a probe process)");
  EXPECT_EQ(message([] { std::abort(); }), "probe.h5: damaged: reading its structure crashed HDF5 (Aborted, in a probe process)");
  sigaction(SIGSEGV, &saved_segv, nullptr);
  sigaction(SIGABRT, &saved_abrt, nullptr);
  EXPECT_EQ(message([] { throw std::bad_alloc(); }), "probe.h5: damaged: reading its structure failed in a probe process (exit status 4)");
}

// A file the store fuzzer made (docs/fuzzing.md; 158 bytes of the seeds changed, not reducible by
// libFuzzer): the root's 'complete' attribute claims a 10-byte value in an 8-byte message, and
// HDF5 1.10.8's attribute lookup copies 10 bytes, past its buffer (ASan: heap-buffer-overflow in
// H5O__msg_iterate_real; a release build reads on silently). hdf5_raw checks the root's attribute
// messages before HDF5 sees the file (and the probe would catch the overflow under ASan).
TEST(Hdf5Store, FuzzerFoundHeaderOverflowIsAnError) {
  const std::string path = std::string(WAVETRAIN_TEST_DATA) + "/damaged/attribute_header_overflow.h5";
  try {
    DatasetReader r(path);
    FAIL() << "opened";
  } catch (const StoreError& e) {
    EXPECT_EQ(std::string(e.what()), path + ": the root group's header: attribute 'complete' at byte 1112 claims 1 values of 10 "
                                         "bytes, more than the 8 bytes its message holds (truncated or damaged?)");
  }
}


// Every damaged store the fuzzer kept (tests/data/damaged/) holds the store fuzzer's invariant: it
// opens, or fails with an error naming the file; what opens reads item by item (fields, lengths,
// ids) with lengths that agree. Two of them (h5dread_overread_in_probe_*) claim chunks of 262,144
// bytes where 4 were written, and HDF5 1.10.8 copied past the 4-byte decoded chunk (ASan in the
// probe; valgrind in a release build, silently otherwise): the chunk grid check refuses them.
TEST(Hdf5Store, EveryKeptFuzzerFindingOpensOrIsANamedError) {
  int files = 0, chunk_errors = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(WAVETRAIN_TEST_DATA) + "/damaged")) {
    if (entry.path().extension() != ".h5") continue;
    ++files;
    const std::string path = entry.path().string();
    try {
      const DatasetReader r(path, 16);
      for (const std::string& split : r.splits())
        for (int64_t i = 0; i < r.size(split); ++i) {
          const Item item = r.item(split, i);
          for (const std::string& field : r.fields(split)) EXPECT_EQ(item.at(field).size(0), r.length(split, field, i)) << path;
          (void)r.id(split, i);
        }
      EXPECT_EQ(path.find("h5dread_overread"), std::string::npos) << "opened " << path;
    } catch (const StoreError& e) {
      EXPECT_EQ(std::string(e.what()).rfind(path + ": ", 0), 0u) << e.what();
      if (path.find("h5dread_overread") != std::string::npos) {
        EXPECT_EQ(std::string(e.what()), path + ": split 'valid' field 'id': its chunk index holds 4 chunks where its size and chunk size "
                                                "make 1 (damaged?)");
        ++chunk_errors;
      }
    }
  }
  EXPECT_EQ(files, 3);
  EXPECT_EQ(chunk_errors, 2);
}
}  // namespace
}  // namespace wavetrain::data
