// The registry of temporary files (base/temp_files.h): SIGINT and SIGTERM remove every
// registered file (one path, or a numbered family) and the process still dies of the signal; a
// file no longer registered is left alone; held signals wait until the hold ends. Each case runs
// in a child process, which the signal kills.
#include "base/temp_files.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace petrsim {
namespace {

namespace fs = std::filesystem;

class TempFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = "petrsim_temp_files_";
    name.append(info->name()).append("_").append(std::to_string(::getpid()));
    directory_ = fs::temp_directory_path() / name;
    fs::remove_all(directory_);
    fs::create_directories(directory_);
  }
  void TearDown() override { fs::remove_all(directory_); }

  std::string Touch(const std::string& name) const {
    const std::string path = (directory_ / name).string();
    std::ofstream(path) << "half-written";
    return path;
  }

  // Runs `body` in a child process and returns its wait status.
  template <typename Body>
  static int InChild(Body body) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      body();
      ::_exit(0);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    return status;
  }

  fs::path directory_;
};

// "rank_<r>.pbtrace.tmp".
std::string RankTmp(uint32_t r) {
  std::string name = "rank_";
  return name.append(std::to_string(r)).append(".pbtrace.tmp");
}

TEST_F(TempFilesTest, SigintRemovesRegisteredFilesAndTheProcessDiesOfIt) {
  const std::string one = Touch("run.json.tmp");
  const std::string kept = Touch("kept.tmp");
  const std::string out = Touch("out.pbtxt");  // not registered: an output already complete
  for (uint32_t r = 0; r < 12; ++r) Touch(RankTmp(r));
  const int status = InChild([&] {
    InstallTempFileCleanup();
    const TempFileRegistration a(one);
    const TempFileRegistration family((directory_ / "rank_").string(), ".pbtrace.tmp", 12);
    TempFileRegistration b(kept);
    b.Reset();  // renamed, say: no longer the registry's
    ::raise(SIGINT);
    ::_exit(0);  // not reached
  });
  ASSERT_TRUE(WIFSIGNALED(status)) << status;
  EXPECT_EQ(WTERMSIG(status), SIGINT);
  EXPECT_FALSE(fs::exists(one));
  for (uint32_t r = 0; r < 12; ++r) {
    EXPECT_FALSE(fs::exists(directory_ / RankTmp(r)));
  }
  EXPECT_TRUE(fs::exists(kept));
  EXPECT_TRUE(fs::exists(out));
}

TEST_F(TempFilesTest, SigtermToo) {
  const std::string one = Touch("x.tmp");
  const int status = InChild([&] {
    InstallTempFileCleanup();
    const TempFileRegistration a(one);
    ::raise(SIGTERM);
  });
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
  EXPECT_FALSE(fs::exists(one));
}

TEST_F(TempFilesTest, HeldSignalsArriveWhenTheCommitEnds) {
  const std::string tmp = Touch("scenario.pbtxt.tmp");
  const std::string final_path = (directory_ / "scenario.pbtxt").string();
  const int status = InChild([&] {
    InstallTempFileCleanup();
    TempFileRegistration registration(tmp);
    {
      const TerminationSignalsHeld held;
      ::raise(SIGINT);  // pending until the commit is done
      fs::rename(tmp, final_path);
      registration.Reset();
    }
    ::_exit(0);  // not reached: the signal is delivered as the hold ends
  });
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGINT);
  EXPECT_TRUE(fs::exists(final_path));
  EXPECT_FALSE(fs::exists(tmp));
}

TEST_F(TempFilesTest, AFullTableOrAnOverlongPathRegistersNothing) {
  std::vector<TempFileRegistration> all;
  for (size_t i = 0; i < kTempFileSlots + 3; ++i) all.emplace_back(Touch(std::to_string(i) + ".tmp"));
  size_t registered = 0;
  for (const auto& r : all) registered += r.registered();
  EXPECT_EQ(registered, kTempFileSlots);
  all.clear();  // every slot free again
  EXPECT_FALSE(TempFileRegistration(std::string(kTempFilePathMax, 'a')).registered());
  EXPECT_TRUE(TempFileRegistration(Touch("again")).registered());
}

}  // namespace
}  // namespace petrsim
