// TORCHNEURON_PROTECT_MEMORY: device memory faults on host access outside
// kernels and with_device_access, and costs nothing when off.
#include <gtest/gtest.h>

#include <csignal>
#include <cstring>

#include "runtime/device_memory.h"
#include "test_util.h"

namespace torchneuron::runtime {
namespace {

using testing::kMiB;
using testing::small_emulator;

std::unique_ptr<Runtime> protected_emulator() {
  return small_emulator(64 * kMiB, 1, false, /*protect=*/true);
}

int host_read(const void* p) { return *static_cast<const volatile char*>(p); }

class ProtectionDeathTest : public ::testing::Test {
 protected:
  // Re-executes the test binary for the death statement: fork() alone is
  // unsafe with stream worker threads running.
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

TEST_F(ProtectionDeathTest, HostReadOutsideAccessFaults) {
  auto rt = protected_emulator();
  char* p = static_cast<char*>(rt->allocate(0, 4096));
  rt->with_device_access([&] { std::memset(p, 5, 4096); });
  EXPECT_EXIT(host_read(p), ::testing::KilledBySignal(SIGSEGV), "");
  int value = 0;
  rt->with_device_access([&] { value = host_read(p + 4095); });
  EXPECT_EQ(value, 5);
}

TEST_F(ProtectionDeathTest, KernelsHaveAccessAndTheHostLosesItAfterwards) {
  auto rt = protected_emulator();
  char* p = static_cast<char*>(rt->allocate(0, 3 * kMiB));  // large pool too
  rt->launch(0, 0, "fill", [p] { std::memset(p, 9, 3 * kMiB); });
  int sum = 0;
  rt->launch(0, 0, "read", [p, &sum] { sum = host_read(p) + host_read(p + 3 * kMiB - 1); });
  rt->synchronize_stream(0, 0);
  EXPECT_EQ(sum, 18);
  EXPECT_EXIT(host_read(p + kMiB), ::testing::KilledBySignal(SIGSEGV), "");
}

TEST(Protection, SegmentsMadeDuringAccessAreUsableAtOnce) {
  auto rt = protected_emulator();
  rt->with_device_access([&] {
    char* p =
        static_cast<char*>(rt->allocate(0, 8 * kMiB));  // a new segment, mapped inside the scope
    std::memset(p, 1, 8 * kMiB);
    // Nested scopes keep access until the outermost closes.
    rt->with_device_access([&] { p[0] = 2; });
    EXPECT_EQ(host_read(p), 2);
    rt->free(p);
  });
}

TEST(Protection, KernelErrorsStillCloseTheScope) {
  auto rt = protected_emulator();
  char* p = static_cast<char*>(rt->allocate(0, 64));
  EXPECT_THROW(rt->with_device_access([&] {
    p[0] = 1;
    throw std::runtime_error("copy failed");
  }),
               std::runtime_error);
  uint64_t before = mprotect_calls();
  rt->with_device_access([&] { p[0] = 3; });  // reopens: the count went back to zero
  EXPECT_GT(mprotect_calls(), before);
  rt->free(p);
}

TEST(Protection, OffMeansNoMprotectCalls) {
  auto rt = small_emulator();
  uint64_t before = mprotect_calls();
  char* p = static_cast<char*>(rt->allocate(0, 4096));
  p[0] = 1;  // plain host memory when protection is off
  rt->launch(0, 0, "touch", [p] { p[1] = 2; });
  rt->with_device_access([p] { p[2] = 3; });
  rt->synchronize_device(0);
  rt->free(p);
  rt->empty_cache(0);
  EXPECT_EQ(mprotect_calls(), before);
  EXPECT_EQ(rt->config().protect_memory, false);
}

}  // namespace
}  // namespace torchneuron::runtime
