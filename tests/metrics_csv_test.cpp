// metrics.csv: columns appear as metrics do, earlier rows keep their values, numbers read back exactly.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "trainer/metrics_csv.h"

namespace fs = std::filesystem;

namespace {

std::string read(const fs::path& p) {
  std::ifstream in(p);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST(MetricsCsv, ColumnsWidenAndRowsKeepTheirValues) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("wavetrain_csv_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  wavetrain::MetricsCsv csv(dir / "metrics.csv");
  EXPECT_EQ(read(dir / "metrics.csv"), "step,epoch\n");
  csv.log(1, 0, {{"train/loss", 0.5}});
  csv.log(2, 0, {{"train/loss", 0.25}});
  EXPECT_EQ(read(dir / "metrics.csv"), "step,epoch,train/loss\n1,0,0.5\n2,0,0.25\n");
  csv.log(2, 0, {{"val/esr", 0.1}, {"val,odd\"name", 3}});
  csv.log(3, 1, {{"train/loss", 1.0 / 3.0}});
  EXPECT_EQ(read(dir / "metrics.csv"),
            "step,epoch,train/loss,val/esr,\"val,odd\"\"name\"\n"
            "1,0,0.5,,\n"
            "2,0,0.25,,\n"
            "2,0,,0.1,3.0\n"
            "3,1,0.3333333333333333,,\n");
  EXPECT_EQ(std::stod("0.3333333333333333"), 1.0 / 3.0);
}

}  // namespace
