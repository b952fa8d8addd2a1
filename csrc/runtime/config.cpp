// config_from_env(): the environment variables that shape the emulated chip.
//   NEURON_LOGICAL_NC_CONFIG   1 or 2 physical cores per logical core (default 2)
//   NEURON_RT_VISIBLE_CORES    logical ids to expose, e.g. "0", "0-1", "0,2"
//   TORCHNEURON_HBM_GIB        HBM capacity per logical core, in GiB (float)
//   NEURON_LAUNCH_BLOCKING     1: every launch waits for its kernel
//   TORCHNEURON_PROTECT_MEMORY 1: device memory is PROT_NONE outside kernels
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "runtime.h"
#include "trainium2.h"

namespace torchneuron::runtime {
namespace {

constexpr size_t kGiB = size_t(1) << 30;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

std::string trim(const std::string& s) {
  const char* ws = " \t\n\r";
  size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

[[noreturn]] void bad(const char* var, const std::string& value, const std::string& why) {
  throw Error(std::string(var) + "='" + value + "': " + why);
}

bool parse_flag(const char* var) {
  std::string v = trim(env(var));
  if (v.empty() || v == "0") return false;
  if (v == "1") return true;
  bad(var, v, "expected 0 or 1");
}

int parse_lnc() {
  std::string v = trim(env("NEURON_LOGICAL_NC_CONFIG"));
  if (v.empty() || v == "2") return 2;
  if (v == "1") return 1;
  bad("NEURON_LOGICAL_NC_CONFIG", v,
      "expected 1 (8 logical NeuronCores of 12 GiB) or 2 (4 logical NeuronCores of 24 GiB)");
}

// A core id: decimal digits only (no sign, no spaces inside).
bool parse_id(const std::string& s, int* out) {
  if (s.empty() || s.size() > 6) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  *out = std::stoi(s);
  return true;
}

std::vector<int> parse_visible(int total, int lnc) {
  const char* var = "NEURON_RT_VISIBLE_CORES";
  std::string v = trim(env(var));
  std::vector<int> ids;
  if (v.empty()) {
    for (int i = 0; i < total; ++i) ids.push_back(i);
    return ids;
  }
  const std::string range = "logical ids are 0-" + std::to_string(total - 1) +
                            " at NEURON_LOGICAL_NC_CONFIG=" + std::to_string(lnc);
  std::vector<bool> seen(total, false);
  size_t start = 0;
  while (true) {
    size_t comma = v.find(',', start);
    std::string item =
        trim(v.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    int lo = 0, hi = 0;
    size_t dash = item.find('-');
    bool ok = false;
    if (dash == std::string::npos) {
      ok = parse_id(item, &lo);
      hi = lo;
    } else {
      ok = parse_id(trim(item.substr(0, dash)), &lo) && parse_id(trim(item.substr(dash + 1)), &hi);
    }
    if (!ok)
      bad(var, v,
          "'" + item + "' is not a core id or range; expected a list like '0', '0-1' or '0,2'");
    if (lo > hi) bad(var, v, "range '" + item + "' is reversed");
    for (int id = lo; id <= hi; ++id) {
      if (id >= total)
        bad(var, v, "core " + std::to_string(id) + " is out of range (" + range + ")");
      if (seen[id]) bad(var, v, "core " + std::to_string(id) + " is listed twice");
      seen[id] = true;
      ids.push_back(id);
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return ids;
}

size_t parse_hbm(size_t dflt) {
  const char* var = "TORCHNEURON_HBM_GIB";
  std::string v = trim(env(var));
  if (v.empty()) return dflt;
  char* end = nullptr;
  double gib = std::strtod(v.c_str(), &end);
  if (end != v.c_str() + v.size() || !std::isfinite(gib) || gib <= 0)
    bad(var, v, "expected a positive number of GiB per NeuronCore, e.g. 0.25");
  if (gib > 1024 * 1024) bad(var, v, "larger than 1 PiB per NeuronCore");
  size_t bytes = static_cast<size_t>(gib * double(kGiB));
  if (bytes == 0) bad(var, v, "less than one byte");
  return bytes;
}

}  // namespace

Config config_from_env() {
  Config c;
  c.logical_nc_config = parse_lnc();
  c.logical_cores_total = trainium2::logical_cores(c.logical_nc_config);
  c.visible = parse_visible(c.logical_cores_total, c.logical_nc_config);
  c.hbm_bytes_per_core = parse_hbm(trainium2::hbm_per_core(c.logical_nc_config));
  c.launch_blocking = parse_flag("NEURON_LAUNCH_BLOCKING");
  c.protect_memory = parse_flag("TORCHNEURON_PROTECT_MEMORY");
  return c;
}

}  // namespace torchneuron::runtime
