// Device choice: every request kind against every availability, with the exact warning texts.
#include <gtest/gtest.h>

#include <cmath>

#include "trainer/device.h"

namespace wavetrain {
namespace {

Availability make(bool cuda_built, int cuda_count, bool mps_built, bool mps_available) {
  Availability a;
  a.torch_version = "9.9.9";
  a.cuda_built = cuda_built;
  a.cuda_device_count = cuda_count;
  a.mps_built = mps_built;
  a.mps_available = mps_available;
  return a;
}

// Outcome codes: a device string; a trailing '!' means a warning was given; "ERR" means DeviceError.
std::string outcome(const std::string& request, const Availability& a) {
  try {
    DeviceChoice c = choose_device(DeviceRequest::parse(request), a);
    return c.device.str() + (c.warnings.empty() ? "" : "!");
  } catch (const DeviceError&) {
    return "ERR";
  }
}

struct Row {
  const char* name;
  Availability available;
  // auto, cpu, cuda, cuda:0, cuda:1, cuda:3, mps
  std::vector<std::string> expected;
};

TEST(DeviceChoice, EveryRequestAgainstEveryAvailability) {
  const std::vector<std::string> requests = {"auto", "cpu", "cuda", "cuda:0", "cuda:1", "cuda:3", "mps"};
  const std::vector<Row> rows = {
      {"nothing", make(false, 0, false, false), {"cpu", "cpu", "cpu!", "cpu!", "cpu!", "cpu!", "cpu!"}},
      {"cuda built, 0 devices", make(true, 0, false, false), {"cpu", "cpu", "cpu!", "cpu!", "cpu!", "cpu!", "cpu!"}},
      {"1 cuda device", make(true, 1, false, false), {"cuda:0", "cpu", "cuda:0", "cuda:0", "ERR", "ERR", "cpu!"}},
      {"2 cuda devices", make(true, 2, false, false), {"cuda:0", "cpu", "cuda:0", "cuda:0", "cuda:1", "ERR", "cpu!"}},
      {"4 cuda devices", make(true, 4, false, false),
       {"cuda:0", "cpu", "cuda:0", "cuda:0", "cuda:1", "cuda:3", "cpu!"}},
      {"mps built, unavailable", make(false, 0, true, false),
       {"cpu", "cpu", "cpu!", "cpu!", "cpu!", "cpu!", "cpu!"}},
      {"mps available", make(false, 0, true, true), {"mps", "cpu", "cpu!", "cpu!", "cpu!", "cpu!", "mps"}},
      {"cuda and mps", make(true, 1, true, true), {"cuda:0", "cpu", "cuda:0", "cuda:0", "ERR", "ERR", "mps"}},
  };
  for (const Row& row : rows) {
    ASSERT_EQ(row.expected.size(), requests.size());
    for (size_t i = 0; i < requests.size(); ++i)
      EXPECT_EQ(outcome(requests[i], row.available), row.expected[i]) << "request " << requests[i] << ", " << row.name;
  }
}

TEST(DeviceChoice, WarningTextsSayWhatWasAskedAndWhy) {
  auto warning = [](const std::string& request, const Availability& a) {
    DeviceChoice c = choose_device(DeviceRequest::parse(request), a);
    EXPECT_EQ(c.device.str(), "cpu");
    EXPECT_EQ(c.warnings.size(), 1u);
    return c.warnings.empty() ? std::string() : c.warnings[0];
  };
  EXPECT_EQ(warning("cuda", make(false, 0, false, false)),
            "device 'cuda' was requested but this LibTorch (9.9.9) was built without CUDA; using cpu");
  EXPECT_EQ(warning("cuda:1", make(true, 0, false, false)),
            "device 'cuda:1' was requested but no CUDA device is available (LibTorch has CUDA, but the driver "
            "reports 0 devices; check the driver and CUDA_VISIBLE_DEVICES); using cpu");
  EXPECT_EQ(warning("mps", make(true, 2, false, false)),
            "device 'mps' was requested but this LibTorch (9.9.9) was built without MPS (MPS exists only in macOS "
            "builds); using cpu");
  EXPECT_EQ(warning("mps", make(false, 0, true, false)),
            "device 'mps' was requested but MPS is not available at run time (LibTorch has MPS, but this macOS "
            "version or machine provides no Metal device for it); using cpu");
}

TEST(DeviceChoice, IndexPastTheLastGpuIsAnErrorNamingTheValidRange) {
  try {
    choose_device(DeviceRequest::parse("cuda:3"), make(true, 1, false, false));
    FAIL() << "expected DeviceError";
  } catch (const DeviceError& e) {
    EXPECT_STREQ(e.what(), "device 'cuda:3' was requested but only 1 CUDA device is available (valid: cuda:0)");
  }
  try {
    choose_device(DeviceRequest::parse("cuda:3"), make(true, 2, false, false));
    FAIL() << "expected DeviceError";
  } catch (const DeviceError& e) {
    EXPECT_STREQ(e.what(),
                 "device 'cuda:3' was requested but only 2 CUDA devices are available (valid: cuda:0 .. cuda:1)");
  }
}

TEST(DeviceRequest, ParsesAcceptedFormsAndRoundTrips) {
  for (const std::string s : {"auto", "cpu", "cuda", "cuda:0", "cuda:12", "mps"})
    EXPECT_EQ(DeviceRequest::parse(s).str(), s);
  EXPECT_EQ(DeviceRequest::parse("CUDA:1").index, 1);
  EXPECT_EQ(DeviceRequest::parse("Auto").kind, DeviceKind::Auto);
}

TEST(DeviceRequest, RejectsOtherFormsWithTheAcceptedList) {
  for (const std::string s : {"tpu", "", "gpu", "cuda:", "cuda:x", "cuda:-1", "cpu:0", "mps:1", "auto:0", "cuda:99999"}) {
    try {
      DeviceRequest::parse(s);
      ADD_FAILURE() << "accepted '" << s << "'";
    } catch (const DeviceError& e) {
      EXPECT_NE(std::string(e.what()).find("Expected one of: auto, cpu, cuda, cuda:N, mps"), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("'" + s + "'"), std::string::npos) << e.what();
    }
  }
}

TEST(CudaMemoryFraction, ValidatesRangeAndWarnsOffCuda) {
  const c10::Device cpu(c10::DeviceType::CPU), cuda(c10::DeviceType::CUDA, 0);
  EXPECT_EQ(check_cuda_memory_fraction(0.5, cuda), "");
  EXPECT_EQ(check_cuda_memory_fraction(1.0, cpu), "");
  EXPECT_EQ(check_cuda_memory_fraction(0.5, cpu),
            "a CUDA memory fraction was set but the device is cpu; it is ignored");
  for (double bad : {0.0, -0.1, 1.5, std::nan("")}) EXPECT_THROW(check_cuda_memory_fraction(bad, cuda), DeviceError);
  EXPECT_NO_THROW(apply_cuda_memory_fraction(0.5, cpu));  // off CUDA: checked, then left alone
}

TEST(Probe, ThisMachineHasCpuAndAutoPicksWhatIsAvailable) {
  const Availability a = probe_availability();
  EXPECT_FALSE(a.torch_version.empty());
  const DeviceChoice c = choose_device(DeviceRequest::parse("auto"), a);
  if (a.cuda_built && a.cuda_device_count > 0) EXPECT_EQ(c.device.str(), "cuda:0");
  else if (a.mps_built && a.mps_available) EXPECT_EQ(c.device.str(), "mps");
  else EXPECT_EQ(c.device.str(), "cpu");
  const std::vector<BackendInfo> rows = describe_backends(a);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].backend, "cpu");
  EXPECT_TRUE(rows[0].available);
  EXPECT_EQ(rows[1].built, a.cuda_built);
  EXPECT_EQ(rows[2].available, a.mps_built && a.mps_available);
}

}  // namespace
}  // namespace wavetrain
