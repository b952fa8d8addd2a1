// config_from_env and the cores an emulator exposes.
#include <gtest/gtest.h>

#include "test_util.h"

namespace torchneuron::runtime {
namespace {

using testing::kGiB;
using testing::kMiB;
using testing::ScopedEnv;

// Every variable unset, then the given ones set.
struct Env : ScopedEnv {
  Env(std::optional<std::string> lnc = std::nullopt,
      std::optional<std::string> visible = std::nullopt,
      std::optional<std::string> hbm = std::nullopt,
      std::optional<std::string> blocking = std::nullopt,
      std::optional<std::string> protect = std::nullopt)
      : ScopedEnv({{"NEURON_LOGICAL_NC_CONFIG", lnc},
                   {"NEURON_RT_VISIBLE_CORES", visible},
                   {"TORCHNEURON_HBM_GIB", hbm},
                   {"NEURON_LAUNCH_BLOCKING", blocking},
                   {"TORCHNEURON_PROTECT_MEMORY", protect}}) {}
};

// The Error's message, or "" if none was thrown.
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Config, Defaults) {
  Env env;
  Config c = config_from_env();
  EXPECT_EQ(c.logical_nc_config, 2);
  EXPECT_EQ(c.logical_cores_total, 4);
  EXPECT_EQ(c.visible, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(c.hbm_bytes_per_core, 24 * kGiB);
  EXPECT_FALSE(c.launch_blocking);
  EXPECT_FALSE(c.protect_memory);
}

TEST(Config, LogicalNcConfigOne) {
  Env env("1");
  Config c = config_from_env();
  EXPECT_EQ(c.logical_nc_config, 1);
  EXPECT_EQ(c.logical_cores_total, 8);
  EXPECT_EQ(c.visible.size(), 8u);
  EXPECT_EQ(c.hbm_bytes_per_core, 12 * kGiB);
}

TEST(Config, LogicalNcConfigBad) {
  for (const char* v : {"3", "0", "two", "2.0"}) {
    Env env(v);
    std::string msg = error_of([] { config_from_env(); });
    EXPECT_NE(msg.find("NEURON_LOGICAL_NC_CONFIG"), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::string("'") + v + "'"), std::string::npos) << msg;
  }
}

TEST(Config, VisibleCores) {
  const std::vector<std::pair<const char*, std::vector<int>>> cases = {
      {"0", {0}},           {"0-1", {0, 1}}, {"0,2", {0, 2}},
      {"1-2,3", {1, 2, 3}}, {"3,1", {3, 1}}, {" 2 - 3 ", {2, 3}},
  };
  for (auto& [value, ids] : cases) {
    Env env(std::nullopt, value);
    EXPECT_EQ(config_from_env().visible, ids) << value;
  }
  Env env("1", "4-7");
  EXPECT_EQ(config_from_env().visible, (std::vector<int>{4, 5, 6, 7}));
}

TEST(Config, VisibleCoresBad) {
  const std::vector<std::pair<const char*, const char*>> cases = {
      {"4", "core 4 is out of range"}, {"0-4", "out of range"},   {"a", "not a core id"},
      {"1-", "not a core id"},         {"-1", "not a core id"},   {"2-1", "reversed"},
      {"0,0", "listed twice"},         {"0-1,1", "listed twice"}, {",", "not a core id"},
      {"0,,1", "not a core id"},       {"1.5", "not a core id"},
  };
  for (auto& [value, why] : cases) {
    Env env(std::nullopt, value);
    std::string msg = error_of([] { config_from_env(); });
    EXPECT_NE(msg.find("NEURON_RT_VISIBLE_CORES"), std::string::npos) << value << ": " << msg;
    EXPECT_NE(msg.find(why), std::string::npos) << value << ": " << msg;
  }
}

TEST(Config, HbmOverride) {
  {
    Env env(std::nullopt, std::nullopt, "0.25");
    EXPECT_EQ(config_from_env().hbm_bytes_per_core, 256 * kMiB);
  }
  {
    Env env("1", std::nullopt, "2");
    EXPECT_EQ(config_from_env().hbm_bytes_per_core, 2 * kGiB);
  }
  for (const char* v : {"0", "-1", "abc", "1x", "inf", "nan", "1e30"}) {
    Env env(std::nullopt, std::nullopt, v);
    std::string msg = error_of([] { config_from_env(); });
    EXPECT_NE(msg.find("TORCHNEURON_HBM_GIB"), std::string::npos) << v << ": " << msg;
  }
}

TEST(Config, Flags) {
  {
    Env env(std::nullopt, std::nullopt, std::nullopt, "1", "1");
    Config c = config_from_env();
    EXPECT_TRUE(c.launch_blocking);
    EXPECT_TRUE(c.protect_memory);
  }
  {
    Env env(std::nullopt, std::nullopt, std::nullopt, "0", "0");
    Config c = config_from_env();
    EXPECT_FALSE(c.launch_blocking);
    EXPECT_FALSE(c.protect_memory);
  }
  {
    Env env(std::nullopt, std::nullopt, std::nullopt, "yes");
    EXPECT_NE(error_of([] { config_from_env(); }).find("NEURON_LAUNCH_BLOCKING='yes'"),
              std::string::npos);
  }
  {
    Env env(std::nullopt, std::nullopt, std::nullopt, std::nullopt, "on");
    EXPECT_NE(error_of([] { config_from_env(); }).find("TORCHNEURON_PROTECT_MEMORY='on'"),
              std::string::npos);
  }
}

TEST(Emulator, CoresFromEnvironment) {
  Env env(std::nullopt, "1-2,3", "0.5");
  auto rt = make_emulator(config_from_env());
  EXPECT_EQ(rt->name(), "emulator");
  EXPECT_FALSE(rt->version().empty());
  ASSERT_EQ(rt->device_count(), 3);
  for (int i = 0; i < 3; ++i) {
    const CoreInfo& core = rt->core(i);
    EXPECT_EQ(core.index, i);
    EXPECT_EQ(core.logical_id, i + 1);
    EXPECT_EQ(core.logical_nc_config, 2);
    EXPECT_EQ(core.hbm_bytes, 512 * kMiB);
    EXPECT_EQ(core.name, "Trainium2 NeuronCore-v3 (emulated, LNC=2)");
    EXPECT_EQ(rt->mem_get_info(i), std::make_pair(512 * kMiB, 512 * kMiB));
  }
  EXPECT_EQ(error_of([&] { rt->core(3); }),
            "invalid neuron device index 3 (3 visible NeuronCores)");
  EXPECT_EQ(error_of([&] { rt->allocate(-1, 8); }),
            "invalid neuron device index -1 (3 visible NeuronCores)");
}

TEST(Emulator, ConfigDefaultsAndChecks) {
  Config c;
  c.logical_nc_config = 1;
  auto rt = make_emulator(c);
  EXPECT_EQ(rt->device_count(), 8);
  EXPECT_EQ(rt->config().logical_cores_total, 8);
  EXPECT_EQ(rt->core(7).hbm_bytes, 12 * kGiB);
  EXPECT_EQ(rt->core(7).name, "Trainium2 NeuronCore-v3 (emulated, LNC=1)");

  Config bad;
  bad.visible = {4};
  EXPECT_NE(error_of([&] { make_emulator(bad); }).find("out of range"), std::string::npos);
  bad.logical_nc_config = 3;
  EXPECT_NE(error_of([&] { make_emulator(bad); }).find("logical_nc_config 3"), std::string::npos);
}

TEST(Emulator, GlobalRuntimeReadsEnvironment) {
  Env env(std::nullopt, "0-1", "0.125");
  Runtime& rt = get();
  EXPECT_EQ(&rt, &get());
  EXPECT_EQ(rt.device_count(), 2);
  EXPECT_EQ(rt.core(1).hbm_bytes, 128 * kMiB);
}

}  // namespace
}  // namespace torchneuron::runtime
